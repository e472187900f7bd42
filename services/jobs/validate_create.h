#pragma once

// What a trainjob create carries by itself (Appendix A.1-2, A.1-3): names, commands,
// counts, policies. No store, no catalog: the scheduler checks specs and images after.

#include <cstddef>

#include "absl/status/status.h"
#include "jointcloud/v1/job_record.pb.h"
#include "jointcloud/v1/jobs.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

// Appendix A.1-2 / A.1-3 limits.
inline constexpr size_t kMaxJobNameLength = 31;
inline constexpr size_t kMaxTaskNameLength = 31;
inline constexpr int kMaxRetries = 10;
// scheduling.priority: within ± this. The queue orders by −priority, which the int32's
// lowest value would overflow (helper-67); who may ask for a high one is still open
// (docs/security.md).
inline constexpr int kMaxPriority = 1000000;

// Fills in what a create may leave out, before it is checked and kept: a task without
// replicaNumber has one replica (an explicit 0 stays, and is refused).
void NormalizeCreate(v1::CreateTrainJobRequest& req);

// Checks what a create carries by itself (names, commands, counts, kinds, policies).
absl::Status ValidateCreate(const v1::CreateTrainJobRequest& req);

// Whether task `task_index` of `job` may be scaled to `replicas` replicas (SPEC A17): a
// service or streaming job that has not ended nor been asked to stop, 1 to
// kMaxReplicasPerTask replicas (0 is a stop: StopTrainJob says so). Scaling to the count it
// has is OK (nothing changes).
absl::Status CheckScale(const v1::JobRecord& job, int task_index, int replicas);

}  // namespace jc::jobs
