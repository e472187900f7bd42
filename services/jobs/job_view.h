#pragma once

// How a stored job reads (Appendix A's TrainJob, SPEC A7): the request as submitted, the
// status, per task the replicas' states, centers and messages in replica order, and on
// request the whole attempt history. A pure function of the record: the job manager gives
// it the record its readers may see (the last committed), the time and the job's place in
// the queue; nothing here reads the store or the manager's state.

#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "jointcloud/v1/job_record.pb.h"
#include "jointcloud/v1/jobs.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

struct JobViewOptions {
  // Every attempt of every replica (task, replica, attempt order), with when each was
  // placed, started and ended, how long it ran (to `now` while it runs), its outcome,
  // exit code and its center's words.
  bool with_history = false;
  absl::Time now = absl::UnixEpoch();
  // Where a pending job stands in the federation queue ("2nd of 7 waiting (sef): ..."),
  // shown only while the job is pending; empty: not shown.
  std::string queue_position;
  // The price per hour of `spec` at `center` in force at `at` (what a usage record would
  // bill); nullopt when the center no longer offers it. Unset: running attempts cost 0.
  std::function<std::optional<double>(const std::string& center, const std::string& spec, absl::Time at)> price_at;
  // Whether the control plane meters (--metering): without, no attempt has a usage record,
  // and none is missing one.
  bool metering = true;
};

// What the job cost (TrainJob.cost): its ended attempts' usage records, as each attempt
// keeps their sum, and its running attempts by the hour since they started, at the price
// their records will bill (the price in force at the submit, as usage_record.cc rates).
v1::JobCost CostOf(const v1::JobRecord& record, const JobViewOptions& options);

v1::TrainJob TrainJobOf(const v1::JobRecord& record, const JobViewOptions& options);
// Its tasks as TrainJob.task_infos shows them (the create's answer holds these alone).
void AddTaskInfos(const v1::JobRecord& record, google::protobuf::RepeatedPtrField<v1::TaskInfo>* out);

}  // namespace jc::jobs
