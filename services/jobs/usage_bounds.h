#pragma once

// What a center may bill for an attempt (issue 44, hole 4): a center is another party, and
// its report of an attempt's times and usage is bounded by what the control plane itself
// saw — the attempt cannot have run before the control plane sent its submit, nor after
// the control plane learnt that it had ended, nor used more CPUs or GPUs than its spec
// allocates. Figures past those bounds are not billed; the center's claim is kept beside
// the record (UsageRecord.center_claim) for reconciliation.

#include <optional>

#include "absl/time/time.h"
#include "jointcloud/adapter/v1/adapter.pb.h"
#include "jointcloud/v1/accounting.pb.h"

namespace jc::jobs {

// IO faster than this is not believed (about a 100 Gb/s link, read and written).
constexpr double kMaxBytesPerSecond = 12.5e9;

// The control plane's own observation of an attempt.
struct ObservedAttempt {
  std::optional<absl::Time> submitted;  // when its submit was sent (none: records from before)
  absl::Time seen_ended;                // when the control plane first learnt its end
  double cpus = 0;                      // the spec's allocation; 0: not bounded
  int gpus = 0;
  int64_t memory_mb = 0;                // likewise
};

struct BilledUsage {
  absl::Time started, ended;
  double wall_seconds = 0;
  double cpu_seconds = 0;
  int gpus = 0;
  double gpu_seconds = 0;
  int64_t memory_peak_mb = 0;
  int64_t read_bytes = 0, write_bytes = 0;
  // Set when the center's figures went past what was observed.
  std::optional<::jointcloud::v1::CenterClaim> claim;
};

// The attempt's figures as billed: the center's `started`/`ended` and `used` (its
// measurement; wall_seconds 0 means "from its start to its end"), each within `observed`:
// a figure that is not a finite, non-negative number counts as not reported (0), and IO
// at most kMaxBytesPerSecond x the billed wall time.
BilledUsage BoundByObservation(absl::Time started, absl::Time ended, const ::jointcloud::adapter::v1::ReplicaUsage& used,
                               const ObservedAttempt& observed);

}  // namespace jc::jobs
