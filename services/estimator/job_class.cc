#include "services/estimator/job_class.h"

#include <openssl/evp.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include "common/sha256_md.h"

namespace jc::estimator {
namespace {

// A stable digest (keys outlive the process in the store): SHA-256's first 16 hex digits.
std::string CommandDigest(absl::string_view command) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(command.data(), command.size(), digest, &size, Sha256Md(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), 8));
}

std::optional<absl::Duration> Positive(const google::protobuf::Duration& d) {
  absl::Duration out = absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
  if (out <= absl::ZeroDuration()) return std::nullopt;
  return out;
}

google::protobuf::Duration ToDurationProto(absl::Duration d) {
  // Within what protobuf's Duration holds (±10,000 years): a record must always encode.
  constexpr int64_t kMaxSeconds = 315576000000;
  d = std::clamp(d, absl::ZeroDuration(), absl::Seconds(kMaxSeconds));
  google::protobuf::Duration out;
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
  return out;
}

}  // namespace

JobClass JobClassOf(const ::jointcloud::v1::CreateTrainJobRequest& job, int task_index) {
  const auto& task = job.tasks(task_index);
  return {job.project(), job.user_name(), job.name(), CommandDigest(task.command()), task.resource_spec_id()};
}

std::optional<absl::Duration> EstimatedDurationOf(const ::jointcloud::v1::CreateTrainJobRequest& job) {
  if (!job.has_estimated_duration()) return std::nullopt;
  return Positive(job.estimated_duration());
}

std::optional<absl::Duration> TimeLimitOf(const ::jointcloud::v1::CreateTrainJobRequest& job) {
  if (!job.has_time_limit()) return std::nullopt;
  return Positive(job.time_limit());
}

::jointcloud::v1::DurationEstimate ToProto(const DurationEstimate& e) {
  ::jointcloud::v1::DurationEstimate out;
  *out.mutable_median() = ToDurationProto(e.median);
  *out.mutable_p90() = ToDurationProto(e.p90);
  out.set_runs(e.runs);
  out.set_basis(e.basis);
  *out.mutable_assumed() = ToDurationProto(e.assumed);
  return out;
}

}  // namespace jc::estimator
