#pragma once

// A submitted job's classes for the duration estimator (SPEC A16): one per task, keyed by
// the job's project, its submitter (set where the request entered, never from a request
// field), its name, a digest of the task's command and its spec.

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "jointcloud/v1/jobs.pb.h"
#include "services/estimator/duration_estimator.h"

namespace jc::estimator {

JobClass JobClassOf(const ::jointcloud::v1::CreateTrainJobRequest& job, int task_index);

// The job's own figures (estimatedDuration, timeLimit); nullopt when unset or not positive.
std::optional<absl::Duration> EstimatedDurationOf(const ::jointcloud::v1::CreateTrainJobRequest& job);
std::optional<absl::Duration> TimeLimitOf(const ::jointcloud::v1::CreateTrainJobRequest& job);

// The proto form of an estimate.
::jointcloud::v1::DurationEstimate ToProto(const DurationEstimate& e);

}  // namespace jc::estimator
