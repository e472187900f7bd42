#include "adapters/sdk/staged_images.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "adapters/sdk/dataset_mover.h"
#include "common/path_inside.h"
#include "common/validate.h"

namespace jc::adapter {

namespace fs = std::filesystem;

namespace {

constexpr char kProjectsDir[] = ".projects";
// One empty file per federation image this SDK staged: a copy at image_dir/<id> without one
// was staged before image ids were per project (issue 44) and may be a project's image of
// that id, so it is not taken for the federation's (it is staged again when asked for).
constexpr char kFederationDir[] = ".federation";

std::string Key(const std::string& project, const std::string& image_id) {
  return project.empty() ? image_id : absl::StrCat(project, "/", image_id);
}

// What a directory holds: its entries but hidden ones (a copy under way or left by a crash).
std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!name.empty() && name[0] != '.') out.push_back(std::move(name));
  }
  return out;
}

}  // namespace

StagedImages::StagedImages(std::string center_id, std::string image_dir, std::vector<std::string> argv)
    : center_id_(std::move(center_id)), image_dir_(std::move(image_dir)), argv_(std::move(argv)) {
  if (image_dir_.empty()) return;
  std::error_code ec;
  for (auto& id : Entries(image_dir_)) {
    if (fs::exists(fs::path(image_dir_) / kFederationDir / id, ec)) held_.insert(std::move(id));
  }
  const fs::path projects = fs::path(image_dir_) / kProjectsDir;
  for (const auto& project : Entries(projects)) {
    for (const auto& id : Entries(projects / project)) held_.insert(Key(project, id));
  }
}

bool StagedImages::Has(const std::string& project, const std::string& image_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.contains(Key(project, image_id));
}

std::string StagedImages::PathFor(const std::string& project, const std::string& image_id) const {
  if (image_dir_.empty()) return "";
  if (!project.empty() && Has(project, image_id)) {
    return (fs::path(image_dir_) / kProjectsDir / project / image_id).string();
  }
  if (Has(image_id)) return (fs::path(image_dir_) / image_id).string();
  return "";
}

std::vector<std::string> StagedImages::Held() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& key : held_) {
    if (key.find('/') == std::string::npos) out.push_back(key);
  }
  return out;
}

absl::StatusOr<pb::StageImageResponse> StagedImages::Stage(const pb::StageImageRequest& req) {
  if (absl::Status id = CheckId("image_id", req.image_id()); !id.ok()) return id;
  if (req.image_id()[0] == '.') {  // hidden names are copies under way
    return absl::InvalidArgumentError(absl::StrCat("image_id \"", req.image_id(), "\" must not start with '.'"));
  }
  const std::string& project = req.project();
  if (!project.empty()) {
    if (absl::Status p = CheckId("project", project); !p.ok()) return p;
    if (project[0] == '.') return absl::InvalidArgumentError(absl::StrCat("project \"", project, "\" must not start with '.'"));
  }
  pb::StageImageResponse out;
  out.mutable_image()->set_image_id(req.image_id());
  out.mutable_image()->set_name(req.name());
  if (Has(project, req.image_id())) return out;
  if (!receives()) {
    return absl::FailedPreconditionError(absl::StrCat("image \"", req.image_id(), "\" is not present at center ",
                                                      center_id_, ", which has no image_mover to fetch it"));
  }
  std::lock_guard<std::mutex> one(one_stage_at_a_time_);
  if (Has(project, req.image_id())) return out;  // staged by the call we waited for
  // A project's images apart from the federation's and other projects' of the same id.
  auto in = [&](const std::string& name) {
    return project.empty() ? PathInside(image_dir_, {name}) : PathInside(image_dir_, {kProjectsDir, project, name});
  };
  auto dest = in(req.image_id());
  auto temp = in(absl::StrCat(".staging-", req.image_id()));
  if (!dest.ok()) return dest.status();
  if (!temp.ok()) return temp.status();
  std::error_code ec;
  fs::create_directories(temp->parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("center ", center_id_, ": cannot create ", temp->parent_path().string(),
                                               " in image_dir: ", ec.message()));
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
    if (project.empty()) {
      const fs::path marker = fs::path(image_dir_) / kFederationDir / req.image_id();
      fs::create_directories(marker.parent_path(), ec);
      std::ofstream(marker).flush();
      if (!fs::exists(marker, ec)) {
        return absl::UnavailableError(absl::StrCat("center ", center_id_, ": cannot record ", marker.string()));
      }
    }
    if (!req.source_urls().empty()) out.set_source_url(source);
    out.set_seconds(absl::ToDoubleSeconds(absl::Now() - started));
    std::lock_guard<std::mutex> lock(mu_);
    held_.insert(Key(project, req.image_id()));
    return out;
  }
  fs::remove_all(*temp, ec);
  return absl::UnavailableError(absl::StrCat("center ", center_id_, " could not fetch image \"", req.image_id(),
                                             "\": ", absl::StrJoin(errors, "; ")));
}

}  // namespace jc::adapter
