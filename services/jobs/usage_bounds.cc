#include "services/jobs/usage_bounds.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/timestamp.h"

namespace jc::jobs {
namespace {

// Figures within a little of the bound are not disputes: two clocks, a report rounded.
constexpr double kSlackSeconds = 1.0;
constexpr double kSlackRatio = 0.01;

bool Past(double claimed, double bound) { return claimed > bound + std::max(kSlackSeconds, kSlackRatio * bound); }

}  // namespace

BilledUsage BoundByObservation(absl::Time started, absl::Time ended, const ::jointcloud::adapter::v1::ReplicaUsage& used,
                               const ObservedAttempt& observed) {
  BilledUsage out;
  std::vector<std::string> bounded;
  const absl::Time from = observed.submitted.value_or(std::min(started, observed.seen_ended));
  const absl::Time to = observed.seen_ended;
  // Times: inside [from, to], the start no later than the end.
  out.started = std::clamp(started, from, std::max(from, to));
  out.ended = std::clamp(std::max(ended, out.started), out.started, std::max(out.started, to));
  if (absl::ToDoubleSeconds(from - started) > kSlackSeconds) {
    bounded.push_back(absl::StrCat("started_at ", absl::FormatTime(started), " before its submit at ",
                                   absl::FormatTime(from)));
  }
  if (absl::ToDoubleSeconds(ended - to) > kSlackSeconds) {
    bounded.push_back(absl::StrCat("ended_at ", absl::FormatTime(ended), " after the control plane learnt its end at ",
                                   absl::FormatTime(to)));
  }
  // Wall time: what the center measured, at most what the control plane saw pass.
  const double observed_wall = std::max(0.0, absl::ToDoubleSeconds(to - from));
  const double claimed_wall =
      used.wall_seconds() > 0 ? used.wall_seconds() : std::max(0.0, absl::ToDoubleSeconds(ended - started));
  out.wall_seconds = std::min(claimed_wall, observed_wall);
  if (Past(claimed_wall, observed_wall)) {
    bounded.push_back(absl::StrCat("wall_seconds ", claimed_wall, " > ", observed_wall,
                                   " from its submit to its end as the control plane saw them"));
  }
  // Allocation x wall: CPUs and GPUs the spec did not give it were not used.
  out.cpu_seconds = used.cpu_seconds();
  if (observed.cpus > 0 && Past(used.cpu_seconds(), observed.cpus * out.wall_seconds)) {
    out.cpu_seconds = observed.cpus * out.wall_seconds;
    bounded.push_back(absl::StrCat("cpu_seconds ", used.cpu_seconds(), " > ", observed.cpus, " CPUs x ",
                                   out.wall_seconds, " s"));
  }
  out.gpus = used.gpus() > 0 ? used.gpus() : observed.gpus;
  if (used.gpus() > observed.gpus) {
    out.gpus = observed.gpus;
    bounded.push_back(absl::StrCat("gpus ", used.gpus(), " > the spec's ", observed.gpus));
  }
  const double claimed_gpu_seconds = used.gpu_seconds() > 0 ? used.gpu_seconds() : out.gpus * out.wall_seconds;
  out.gpu_seconds = std::min(claimed_gpu_seconds, out.gpus * out.wall_seconds);
  if (Past(claimed_gpu_seconds, out.gpus * out.wall_seconds)) {
    bounded.push_back(absl::StrCat("gpu_seconds ", claimed_gpu_seconds, " > ", out.gpus, " GPUs x ",
                                   out.wall_seconds, " s"));
  }
  if (!bounded.empty()) {
    ::jointcloud::v1::CenterClaim claim;
    *claim.mutable_started_at() = ToTimestamp(started);
    *claim.mutable_ended_at() = ToTimestamp(ended);
    claim.set_wall_seconds(claimed_wall);
    claim.set_cpu_seconds(used.cpu_seconds());
    claim.set_gpus(used.gpus());
    claim.set_gpu_seconds(claimed_gpu_seconds);
    claim.set_bounded(absl::StrJoin(bounded, "; "));
    out.claim = std::move(claim);
  }
  return out;
}

}  // namespace jc::jobs
