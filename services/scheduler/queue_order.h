#pragma once

// The federation's queue orders (SPEC A11, A15, A16): which waiting job the scheduler offers
// a place next, one class per order behind one interface (as the executor's
// executor/policy/queue_order.h). An order ranks a job; the queue offers jobs by priority,
// then rank, then submission, and can put project fair share above any order (the project
// with the smallest dominant share first, its jobs in the order's rank).
//
//   fcfs   first come, first served.
//   sef    shortest expected first: the job expected to run shortest goes first (its
//          estimate from history, SPEC A16), aged — a job's expected length counts down by
//          `aging` seconds for every second it waits — so a long job waits at most about
//          its own length / aging behind a stream of short ones.
//   hrrn   highest response ratio next (the default): the job whose (wait + expected) /
//          expected is highest goes first, the expected length as sef's; no aging of its
//          own (a long job behind more short work than the federation runs waits until
//          `max_wait_s`).
//   las    least attained service (Tiresias' discretized 2D-LAS, without durations): a job
//          that already ran (earlier attempts, GPU-seconds) goes behind those that ran less,
//          by levels (`las_levels`), first come first served within a level.
// Every order: a job that has waited `max_wait_s` goes ahead of every job that has not
// (first come first served among such), so nothing starves whatever the estimates say.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::scheduler {

// What an order may know of a waiting job. Times are seconds on the caller's clock.
struct QueuedJob {
  int64_t seq = 0;  // unique per job, orders submissions
  int priority = 0;
  std::string project;
  double submitted = 0;
  double expected_s = -1;  // expected run time (reference seconds); < 0 unknown
  // expected_s is a one-off's cautious figure, above its median (estimator::DurationEstimate::
  // assumed): the explanation says so.
  bool one_off = false;
  double attained_s = 0;   // service already received by earlier attempts (GPU-seconds)
};

// What the control plane (--queue_order, --queue_aging) and jc-sim run when told nothing,
// chosen by measurement (docs/placement-quality.md, "The shipped default", and since
// session 67 hrrn, "Session 67"; tests/bench/placement_quality_bench part 3 prints it
// against FCFS with first fit). The aging is sef's.
inline constexpr char kDefaultQueueOrder[] = "hrrn";
inline constexpr double kDefaultQueueAging = 0.25;

struct QueueSettings {
  std::string order = "fcfs";  // fcfs | sef | hrrn | las
  bool fair_share = false;     // project fair share above the order
  double max_wait_s = 86400;   // past it, ahead of the order's choice
  double aging = kDefaultQueueAging;  // sef: seconds of expected length forgiven per second waited
  double unknown_expected_s = 3600;  // sef, hrrn: a job with no estimate counts as this long
  std::vector<double> las_levels = {3600, 36000};  // las: attained GPU-seconds between levels
  // "fcfs", "fair_share", "sef", "fair_share+sef", "hrrn", "fair_share+hrrn", "las",
  // "fair_share+las".
  std::string Name() const;
  // The order ranks by expected run times (sef, hrrn): its jobs need their estimates.
  bool UsesExpected() const { return order == "sef" || order == "hrrn"; }
};

// One of the names QueueSettings::Name gives; InvalidArgument naming the valid ones.
absl::StatusOr<QueueSettings> ParseQueueSettings(absl::string_view name);

class QueueOrderPolicy {
 public:
  virtual ~QueueOrderPolicy() = default;
  // Smaller goes first among jobs of one priority (ties: submission order).
  virtual double Rank(const QueuedJob& job, double now) const = 0;
  // Why the job stands where it does: "expected 42 min, waited 3 min".
  virtual std::string Explain(const QueuedJob& job, double now) const = 0;
};

std::unique_ptr<QueueOrderPolicy> MakeQueueOrderPolicy(const QueueSettings& settings);

}  // namespace jc::scheduler
