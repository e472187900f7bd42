#pragma once

// Duration learning (SPEC A16): what the job manager teaches the duration estimator. Every
// attempt that ran to its end is one observation of its job class (estimator/job_class.h),
// its rows written with the burst that closed it and read back at leadership; the store's
// rows are bounded as memory's are. The job manager owns the estimator's wiring (loading at
// leadership, unloading on a step-down, estimates for new jobs); this unit decides what an
// ended attempt says of a job's length and when the stored rows are trimmed. Loop thread
// only: no lock.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "jointcloud/v1/job_record.pb.h"
#include "services/estimator/shared_estimator.h"
#include "services/jobs/job_state.h"

namespace jc::jobs {

// In the stop reason of a job its time limit stopped (EnforceTimeLimit): such a run is a
// lower bound of the job's length, and is learned as one.
inline constexpr char kTimeLimitStop[] = "ran past the job's time limit";

class DurationLearning {
 public:
  // A center's speed relative to the reference (the scheduler's view: Scheduler::PerformanceOf).
  using PerformanceOf = std::function<double(const std::string& center_id)>;

  explicit DurationLearning(PerformanceOf performance) : performance_(std::move(performance)) {}

  // What is taught; null (the default): nothing is learned. Set before the loop runs; it
  // outlives this.
  void SetEstimator(estimator::SharedEstimator* estimator) { estimator_ = estimator; }

  // Teaches the estimator the attempts `fx` closed that ran to their end; the estimator's
  // changed rows go to `rows` by key, for the burst's write. Returns how many runs it taught.
  int Learn(const v1::JobRecord& r, const JobEffects& fx, std::map<std::string, std::string>* rows) const;

  // For a burst that writes rows at `now`: how many rows the store keeps (the newest), or 0
  // to keep them all. Once the estimator is full (it evicts the least recently observed
  // keys), the oldest stored rows go too, at most hourly (it scans the index).
  int64_t RowsToKeep(absl::Time now);

 private:
  estimator::SharedEstimator* estimator_ = nullptr;
  PerformanceOf performance_;
  absl::Time pruned_ = absl::InfinitePast();  // when the store's rows were last bounded
};

}  // namespace jc::jobs
