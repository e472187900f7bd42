#pragma once

// What a job watch sends (WatchTrainJobs, the REST event streams; SPEC C8): a snapshot or
// the events after the caller's cursor, then each committed change of the jobs the caller
// may see (VIEWER in the job's project, as reads of jobs: job_access.h), heartbeats when
// asked for; a watch of one job ends once that job ended and its events were sent. The
// stream itself runs on the hub (common/watch_call.h).

#include <memory>

#include "common/auth/principal.h"
#include "common/watch_call.h"
#include "jointcloud/v1/jobs.pb.h"
#include "services/jobs/job_manager.h"

namespace jc::jobs {

// INVALID_ARGUMENT for a heartbeat out of range; the rest is checked when the feed opens.
absl::StatusOr<std::unique_ptr<WatchFeed<v1::TrainJobEvent>>> MakeJobWatchFeed(
    JobManager* jobs, std::shared_ptr<const auth::Principal> caller, const v1::WatchTrainJobsRequest& request);

}  // namespace jc::jobs
