#include "adapters/sdk/image_mirror.h"

#include <unistd.h>

#include <filesystem>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "adapters/sdk/run_program.h"
#include "common/oci/image_reference.h"

namespace jc::adapter {

absl::StatusOr<std::string> ImageMirror::MirrorReference(const std::string& image) const {
  auto ref = oci::ImageReference::Parse(image);
  if (!ref.ok()) return ref.status();
  if (ref->digest.empty()) return absl::InvalidArgumentError(absl::StrCat("image ", image, " is not named by digest"));
  return absl::StrCat(absl::StripSuffix(config_.registry, "/"), "/", ref->repository, "@", ref->digest);
}

absl::StatusOr<std::string> ImageMirror::Copy(const std::string& image) {
  auto ref = oci::ImageReference::Parse(image);
  if (!ref.ok()) return ref.status();
  auto target = MirrorReference(image);
  if (!target.ok()) return target.status();
  std::lock_guard<std::mutex> one(one_copy_at_a_time_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (copied_.contains(ref->ToString())) return *target;
  }
  // Pushed under a tag naming the digest (a registry takes no push by digest alone); the
  // manifest is copied as it is, so the mirror serves it under the same digest.
  const std::string tagged = absl::StrCat(absl::StripSuffix(config_.registry, "/"), "/", ref->repository, ":jc-",
                                          ref->digest.substr(7, 16));
  std::vector<std::string> args = {"skopeo", "copy", "--quiet", "--preserve-digests"};
  if (!config_.source_auth_file.empty()) args.push_back("--src-authfile=" + config_.source_auth_file);
  if (!config_.source_cert_dir.empty()) args.push_back("--src-cert-dir=" + config_.source_cert_dir);
  if (!config_.auth_file.empty()) args.push_back("--dest-authfile=" + config_.auth_file);
  if (!config_.cert_dir.empty()) args.push_back("--dest-cert-dir=" + config_.cert_dir);
  args.push_back("docker://" + ref->ToString());
  args.push_back("docker://" + tagged);
  std::error_code ec;
  std::filesystem::create_directories(work_dir_, ec);
  const ProgramResult run = RunProgram(args, absl::StrCat(work_dir_, "/.mirror-", getpid(), ".log"));
  if (!run.started) return absl::FailedPreconditionError(absl::StrCat("cannot run skopeo: ", run.how));
  if (!run.ok) {
    // skopeo's reason is its last line (level=fatal msg="...").
    std::string why(absl::StripAsciiWhitespace(run.output));
    if (auto at = why.rfind("msg=\""); at != std::string::npos) why = why.substr(at + 5);
    why = std::string(absl::StripSuffix(why, "\""));
    return absl::UnavailableError(absl::StrCat("cannot copy image ", image, " into ", config_.registry, ": ", why));
  }
  std::lock_guard<std::mutex> lock(mu_);
  copied_.insert(ref->ToString());
  checked_.erase(ref->ToString());
  return *target;
}

std::optional<std::string> ImageMirror::Copied(const std::string& image) const {
  if (!configured()) return std::nullopt;
  auto ref = oci::ImageReference::Parse(image);
  if (!ref.ok()) return std::nullopt;
  auto target = MirrorReference(image);
  if (!target.ok()) return std::nullopt;
  const std::string key = ref->ToString();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (copied_.contains(key)) return *target;
    if (checked_.contains(key)) return std::nullopt;
  }
  // Not copied by this adapter since it started: the mirror may hold it from before.
  std::vector<std::string> args = {"skopeo", "inspect", "--raw"};
  if (!config_.auth_file.empty()) args.push_back("--authfile=" + config_.auth_file);
  if (!config_.cert_dir.empty()) args.push_back("--cert-dir=" + config_.cert_dir);
  args.push_back("docker://" + *target);
  const ProgramResult run = RunProgram(args, absl::StrCat(work_dir_, "/.mirror-inspect-", getpid(), "-",
                                                          std::hash<std::string>()(key), ".log"));
  std::lock_guard<std::mutex> lock(mu_);
  if (run.ok) {
    copied_.insert(key);
    return *target;
  }
  checked_.insert(key);  // asked once; a later Copy adds it
  return std::nullopt;
}

}  // namespace jc::adapter
