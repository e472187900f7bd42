#pragma once

// A job's status from its replicas' states, by the job's status policy (standard 6.4 a–d),
// and the retry policy's decision for a failed replica attempt.

#include <string>

#include "absl/time/time.h"
#include "google/protobuf/repeated_field.h"
#include "jointcloud/v1/job_record.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

// Appendix A job and replica statuses.
inline constexpr char kPending[] = "pending";
inline constexpr char kRunning[] = "running";
inline constexpr char kCompleted[] = "completed";
inline constexpr char kFailed[] = "failed";

struct JobOutcome {
  std::string status;  // pending, running, completed, failed
  std::string reason;  // for completed and failed: which policy rule decided
  bool ended() const { return status == kCompleted || status == kFailed; }
};

// a) all succeed -> completed, and a replica failing for good fails the job;
// b) any succeeds -> completed, failed once every replica failed;
// c) failed only when every replica failed, completed once all ended otherwise;
// d) any fails -> failed, completed once all succeeded.
// Before it is decided: running once a replica runs or ended, else pending.
JobOutcome EvaluateJob(v1::StatusPolicy policy, const google::protobuf::RepeatedPtrField<v1::ReplicaRecord>& replicas);

// pending (waiting, dispatching, queued in the center), running, completed, failed (failed
// or stopped).
const char* ReplicaStatus(v1::ReplicaRecord::State state);

bool Ended(v1::ReplicaRecord::State state);

// The retry policy (6.4: a failed job is retried at most N times): when the attempt that
// just failed may be retried, moves the replica back to WAITING for its next attempt,
// remembering the center that failed it, and returns true. The retry waits from `now`
// (restart_after): the time its failed attempt ran is not time it waited (helper-67).
bool RetryIfAllowed(const v1::RetryPolicy& policy, v1::ReplicaRecord* replica, absl::Time now);

}  // namespace jc::jobs
