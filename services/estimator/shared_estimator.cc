#include "services/estimator/shared_estimator.h"

#include "services/estimator/job_class.h"

namespace jc::estimator {

std::vector<DurationEstimator::Row> SharedEstimator::Observe(const JobClass& job, absl::Duration wall,
                                                             double performance) {
  absl::MutexLock lock(&mu_);
  return estimator_.Observe(job, wall, performance);
}

absl::Status SharedEstimator::Reset(const std::vector<DurationEstimator::Row>& rows) {
  DurationEstimator fresh(options_);
  if (absl::Status loaded = fresh.Import(rows); !loaded.ok()) return loaded;
  absl::MutexLock lock(&mu_);
  estimator_ = std::move(fresh);
  loaded_ = true;
  return absl::OkStatus();
}

void SharedEstimator::Unload() {
  DurationEstimator empty(options_);
  absl::MutexLock lock(&mu_);
  estimator_ = std::move(empty);
  loaded_ = false;
}

bool SharedEstimator::loaded() const {
  absl::MutexLock lock(&mu_);
  return loaded_;
}

std::optional<DurationEstimate> SharedEstimator::EstimateTask(const ::jointcloud::v1::CreateTrainJobRequest& job,
                                                              int task_index, double performance) const {
  const JobClass c = JobClassOf(job, task_index);
  const auto estimated = EstimatedDurationOf(job);
  const auto limit = TimeLimitOf(job);
  absl::MutexLock lock(&mu_);
  return estimator_.Estimate(c, performance, estimated, limit);
}

std::optional<DurationEstimate> SharedEstimator::EstimateJob(const ::jointcloud::v1::CreateTrainJobRequest& job,
                                                             absl::Duration unknown, TaskEstimates* tasks) const {
  const std::optional<absl::Duration> limit = TimeLimitOf(job);
  // How long the queue would take a task to run were its estimate the job's.
  auto trusted = [&](const std::optional<DurationEstimate>& e) {
    if (e && e->runs > 0) return e->assumed;
    return limit ? *limit : unknown;
  };
  std::optional<DurationEstimate> longest;
  absl::Duration longest_trusted = -absl::InfiniteDuration();
  if (tasks != nullptr) {
    tasks->clear();
    tasks->reserve(job.tasks_size());
  }
  for (int t = 0; t < job.tasks_size(); ++t) {
    auto e = EstimateTask(job, t);
    if (tasks != nullptr) tasks->push_back(e);
    const absl::Duration length = trusted(e);
    // Equal for the queue: the one that says more (a figure over none, the longer figure).
    const bool says_more = e && (!longest || e->assumed > longest->assumed);
    if (length > longest_trusted || (length == longest_trusted && says_more)) {
      longest = std::move(e);
      longest_trusted = length;
    }
  }
  return longest;
}

int64_t SharedEstimator::keys() const {
  absl::MutexLock lock(&mu_);
  return estimator_.keys();
}

}  // namespace jc::estimator
