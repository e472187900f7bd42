#include "services/jobs/usage_bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// A figure another party reported: a finite, non-negative number, else nothing (0), said so.
double Sane(double v, const char* name, std::vector<std::string>* bounded) {
  if (std::isfinite(v) && v >= 0) return v;
  bounded->push_back(absl::StrCat(name, " ", v, " is not a measurement"));
  return 0;
}
int64_t Sane(int64_t v, const char* name, std::vector<std::string>* bounded) {
  if (v >= 0) return v;
  bounded->push_back(absl::StrCat(name, " ", v, " is not a measurement"));
  return 0;
}

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
  // Wall time: what the center measured, at most what the control plane saw pass, and at
  // most the billed start to end (a short run is not billed as a long one at a later price).
  const double observed_wall = std::max(0.0, absl::ToDoubleSeconds(to - from));
  const double billed_span = std::max(0.0, absl::ToDoubleSeconds(out.ended - out.started));
  const double reported_wall = Sane(used.wall_seconds(), "wall_seconds", &bounded);
  const double claimed_wall =
      reported_wall > 0 ? reported_wall : std::max(0.0, absl::ToDoubleSeconds(ended - started));
  const double wall_bound = std::min(observed_wall, billed_span + kSlackSeconds);
  out.wall_seconds = std::min(claimed_wall, wall_bound);
  if (Past(claimed_wall, wall_bound)) {
    bounded.push_back(absl::StrCat("wall_seconds ", claimed_wall, " > ", wall_bound,
                                   " from its start to its end within what the control plane saw"));
  }
  // Allocation x wall: CPUs and GPUs the spec did not give it were not used.
  out.cpu_seconds = Sane(used.cpu_seconds(), "cpu_seconds", &bounded);
  if (observed.cpus > 0 && Past(out.cpu_seconds, observed.cpus * out.wall_seconds)) {
    bounded.push_back(absl::StrCat("cpu_seconds ", out.cpu_seconds, " > ", observed.cpus, " CPUs x ",
                                   out.wall_seconds, " s"));
    out.cpu_seconds = observed.cpus * out.wall_seconds;
  }
  const int reported_gpus = used.gpus() < 0 ? 0 : used.gpus();
  if (used.gpus() < 0) bounded.push_back(absl::StrCat("gpus ", used.gpus(), " is not a measurement"));
  out.gpus = reported_gpus > 0 ? reported_gpus : observed.gpus;
  if (reported_gpus > observed.gpus) {
    out.gpus = observed.gpus;
    bounded.push_back(absl::StrCat("gpus ", reported_gpus, " > the spec's ", observed.gpus));
  }
  out.memory_peak_mb = Sane(used.memory_peak_mb(), "memory_peak_mb", &bounded);
  if (observed.memory_mb > 0 && out.memory_peak_mb > observed.memory_mb) {
    bounded.push_back(absl::StrCat("memory_peak_mb ", out.memory_peak_mb, " > the spec's ", observed.memory_mb));
    out.memory_peak_mb = observed.memory_mb;
  }
  const double io_bound = kMaxBytesPerSecond * std::max(out.wall_seconds, kSlackSeconds);
  for (auto [field, value, into] : {std::make_tuple("read_bytes", used.read_bytes(), &out.read_bytes),
                                    std::make_tuple("write_bytes", used.write_bytes(), &out.write_bytes)}) {
    *into = Sane(value, field, &bounded);
    if (static_cast<double>(*into) > io_bound) {
      bounded.push_back(absl::StrCat(field, " ", *into, " > ", io_bound, " at most in ", out.wall_seconds, " s"));
      *into = static_cast<int64_t>(io_bound);
    }
  }
  const double reported_gpu_seconds = Sane(used.gpu_seconds(), "gpu_seconds", &bounded);
  const double claimed_gpu_seconds = reported_gpu_seconds > 0 ? reported_gpu_seconds : out.gpus * out.wall_seconds;
  out.gpu_seconds = std::min(claimed_gpu_seconds, out.gpus * out.wall_seconds);
  if (Past(claimed_gpu_seconds, out.gpus * out.wall_seconds)) {
    bounded.push_back(absl::StrCat("gpu_seconds ", claimed_gpu_seconds, " > ", out.gpus, " GPUs x ",
                                   out.wall_seconds, " s"));
  }
  if (!bounded.empty()) {
    ::jointcloud::v1::CenterClaim claim;
    *claim.mutable_started_at() = ToTimestamp(started);
    *claim.mutable_ended_at() = ToTimestamp(ended);
    claim.set_wall_seconds(std::isfinite(used.wall_seconds()) && used.wall_seconds() > 0 ? used.wall_seconds()
                                                                                          : claimed_wall);
    claim.set_cpu_seconds(std::isfinite(used.cpu_seconds()) ? used.cpu_seconds() : -1);
    claim.set_gpus(used.gpus());
    claim.set_gpu_seconds(std::isfinite(used.gpu_seconds()) ? used.gpu_seconds() : -1);
    claim.set_bounded(absl::StrJoin(bounded, "; "));
    out.claim = std::move(claim);
  }
  return out;
}

}  // namespace jc::jobs
