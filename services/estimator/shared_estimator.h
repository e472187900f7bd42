#pragma once

// The control plane's one duration estimator (SPEC A16), shared by the job manager, which
// teaches it what ended and keeps its rows in the store, and the scheduler, which asks it
// for placements and plans. Memory only: no store access and no I/O under its lock.

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "jointcloud/v1/jobs.pb.h"
#include "services/estimator/duration_estimator.h"

namespace jc::estimator {

// Per task of a job, what is expected of it (nullopt: nothing known).
using TaskEstimates = std::vector<std::optional<DurationEstimate>>;

class SharedEstimator {
 public:
  explicit SharedEstimator(EstimatorOptions options = {}) : options_(options), estimator_(options) {}

  // One run observed; returns the rows it changed (for the caller to write).
  std::vector<DurationEstimator::Row> Observe(const JobClass& job, absl::Duration wall, double performance)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces everything with `rows` (what the store holds, most recent first): a new
  // leadership term starts from what was committed. The history is then loaded.
  absl::Status Reset(const std::vector<DurationEstimator::Row>& rows) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the history (a step-down: the next leader learns on, and what this instance
  // knew goes stale). Until the next Reset, estimates come from the job's own figures only.
  void Unload() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the history is the store's as of a leadership term (Reset since the start or the
  // last Unload). A standby's never is: its plans say so rather than present no history, or
  // an old one, as fact.
  bool loaded() const ABSL_LOCKS_EXCLUDED(mu_);

  // Task `task_index` of `job` at a center of `performance`: history, else the job's own
  // estimatedDuration, else its time limit; nullopt when nothing is known.
  std::optional<DurationEstimate> EstimateTask(const ::jointcloud::v1::CreateTrainJobRequest& job, int task_index,
                                               double performance = 1.0) const ABSL_LOCKS_EXCLUDED(mu_);
  // The job's: its longest task's (its replicas run side by side), longest as the queue
  // orders take it (waiting_queue.cc): a learned figure as it is, but the job's own
  // unenforced estimatedDuration as its time limit, else `unknown` — so a task with a made-up
  // figure cannot stand for a job whose other task is known to run longer (helper-66). A
  // task nothing is known of counts `unknown` too, and when it is the longest the job has no
  // estimate (the queue then takes it as `unknown`). With `tasks`, also each task's
  // EstimateTask at performance 1, which a placement of the same job can take rather than
  // ask again.
  std::optional<DurationEstimate> EstimateJob(const ::jointcloud::v1::CreateTrainJobRequest& job,
                                              absl::Duration unknown = absl::Hours(1),
                                              TaskEstimates* tasks = nullptr) const ABSL_LOCKS_EXCLUDED(mu_);

  int64_t keys() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t max_keys() const { return options_.max_keys; }

 private:
  const EstimatorOptions options_;
  mutable absl::Mutex mu_;
  DurationEstimator estimator_ ABSL_GUARDED_BY(mu_);
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace jc::estimator
