#pragma once

// A job record whose replicas wait at a center, as the move tests start from: each replica
// placed there and acknowledged as pending (the state machine's own path, not set by hand).

#include <string>

#include "absl/time/time.h"
#include "jointcloud/v1/job_record.pb.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/job_state.h"

namespace jc::jobs::testing {

struct PendingJobOptions {
  std::string job_id = "job-1";
  bool gang = false;
  int max_retries = 0;
  absl::Time at = absl::FromUnixSeconds(1'800'000'000);  // placed and acknowledged then
};

// A job of `replicas` replicas of one task, each acknowledged as pending at `center`.
inline ::jointcloud::v1::JobRecord PendingJob(int replicas, const std::string& center,
                                              const PendingJobOptions& o = {}) {
  namespace v1 = ::jointcloud::v1;
  namespace apb = ::jointcloud::adapter::v1;
  v1::JobRecord job;
  job.set_job_id(o.job_id);
  job.set_status("pending");
  auto* task = job.mutable_request()->add_tasks();
  task->set_name("train");
  task->set_replica_number(replicas);
  job.mutable_request()->mutable_scheduling()->set_gang(o.gang);
  job.mutable_request()->mutable_retry_policy()->set_max_retries(o.max_retries);
  for (int i = 0; i < replicas; ++i) {
    auto* rep = job.add_replicas();
    rep->set_replica_index(i);
    rep->set_center_id(center);
    rep->set_state(v1::ReplicaRecord::DISPATCHING);
    NotePlaced(job, i, o.at);
    apb::Replica answer;
    answer.mutable_key()->set_replica_index(i);
    answer.set_state(apb::REPLICA_PENDING);
    JobEffects fx;
    ApplySubmitAccepted(job, i, answer, o.at, &fx);
  }
  return job;
}

}  // namespace jc::jobs::testing
