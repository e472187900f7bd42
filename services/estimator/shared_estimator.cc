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

std::optional<DurationEstimate> SharedEstimator::EstimateJob(const ::jointcloud::v1::CreateTrainJobRequest& job) const {
  std::optional<DurationEstimate> longest;
  for (int t = 0; t < job.tasks_size(); ++t) {
    auto e = EstimateTask(job, t);
    if (e && (!longest || e->assumed > longest->assumed)) longest = std::move(e);
  }
  return longest;
}

int64_t SharedEstimator::keys() const {
  absl::MutexLock lock(&mu_);
  return estimator_.keys();
}

}  // namespace jc::estimator
