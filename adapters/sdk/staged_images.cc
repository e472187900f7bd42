#include "adapters/sdk/staged_images.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "adapters/sdk/dataset_mover.h"
#include "common/path_inside.h"
#include "common/validate.h"

namespace jc::adapter {

namespace fs = std::filesystem;

StagedImages::StagedImages(std::string center_id, std::string image_dir, std::vector<std::string> argv)
    : center_id_(std::move(center_id)), image_dir_(std::move(image_dir)), argv_(std::move(argv)) {
  if (image_dir_.empty()) return;
  std::error_code ec;
  for (fs::directory_iterator it(image_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!name.empty() && name[0] != '.') held_.insert(name);  // hidden: a copy under way or left by a crash
  }
}

bool StagedImages::Has(const std::string& image_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.contains(image_id);
}

std::vector<std::string> StagedImages::Held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {held_.begin(), held_.end()};
}

absl::StatusOr<pb::StageImageResponse> StagedImages::Stage(const pb::StageImageRequest& req) {
  if (absl::Status id = CheckId("image_id", req.image_id()); !id.ok()) return id;
  if (req.image_id()[0] == '.') {  // hidden names are copies under way
    return absl::InvalidArgumentError(absl::StrCat("image_id \"", req.image_id(), "\" must not start with '.'"));
  }
  pb::StageImageResponse out;
  out.mutable_image()->set_image_id(req.image_id());
  out.mutable_image()->set_name(req.name());
  if (Has(req.image_id())) return out;
  if (!receives()) {
    return absl::FailedPreconditionError(absl::StrCat("image \"", req.image_id(), "\" is not present at center ",
                                                      center_id_, ", which has no image_mover to fetch it"));
  }
  std::lock_guard<std::mutex> one(one_stage_at_a_time_);
  if (Has(req.image_id())) return out;  // staged by the call we waited for
  auto dest = PathInside(image_dir_, {req.image_id()});
  auto temp = PathInside(image_dir_, {absl::StrCat(".staging-", req.image_id())});
  if (!dest.ok()) return dest.status();
  if (!temp.ok()) return temp.status();
  std::error_code ec;
  fs::create_directories(image_dir_, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("center ", center_id_, ": cannot create image_dir ", image_dir_, ": ",
                                               ec.message()));
  }
  // {image_id} and {name} now; the mover puts in {source} and {target} per attempt.
  CommandMoverConfig config{"image", {}};
  for (const auto& a : argv_) {
    config.argv.push_back(absl::StrReplaceAll(a, {{"{image_id}", req.image_id()}, {"{name}", req.name()}}));
  }
  std::unique_ptr<DatasetMover> mover = MakeCommandMover(std::move(config));
  std::vector<std::string> sources(req.source_urls().begin(), req.source_urls().end());
  if (sources.empty()) sources.push_back(req.image_id());
  std::vector<std::string> errors;
  for (const auto& source : sources) {
    fs::remove_all(*temp, ec);
    absl::Time started = absl::Now();
    absl::Status copied = mover->Copy(source, *temp);
    if (copied.ok() && !fs::exists(*temp, ec)) {
      copied = absl::UnavailableError(
          absl::StrCat(source, ": the image mover exited 0 but wrote nothing at {target} (", temp->string(), ")"));
    }
    if (!copied.ok()) {
      errors.push_back(std::string(copied.message()));
      if (!req.source_urls().empty()) out.add_failed_source_urls(source);
      continue;
    }
    fs::remove_all(*dest, ec);
    fs::rename(*temp, *dest, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("center ", center_id_, ": cannot move the staged image into ", dest->string(), ": ", ec.message()));
    }
    if (!req.source_urls().empty()) out.set_source_url(source);
    out.set_seconds(absl::ToDoubleSeconds(absl::Now() - started));
    std::lock_guard<std::mutex> lock(mu_);
    held_.insert(req.image_id());
    return out;
  }
  fs::remove_all(*temp, ec);
  return absl::UnavailableError(absl::StrCat("center ", center_id_, " could not fetch image \"", req.image_id(),
                                             "\": ", absl::StrJoin(errors, "; ")));
}

}  // namespace jc::adapter
