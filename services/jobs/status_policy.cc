#include "services/jobs/status_policy.h"

#include "absl/strings/str_cat.h"
#include "common/timestamp.h"

namespace jc::jobs {

bool Ended(v1::ReplicaRecord::State s) {
  return s == v1::ReplicaRecord::SUCCEEDED || s == v1::ReplicaRecord::FAILED || s == v1::ReplicaRecord::STOPPED;
}

const char* ReplicaStatus(v1::ReplicaRecord::State s) {
  switch (s) {
    case v1::ReplicaRecord::RUNNING: return kRunning;
    case v1::ReplicaRecord::SUCCEEDED: return kCompleted;
    case v1::ReplicaRecord::FAILED:
    case v1::ReplicaRecord::STOPPED: return kFailed;
    default: return kPending;
  }
}

JobOutcome EvaluateJob(v1::StatusPolicy policy, const google::protobuf::RepeatedPtrField<v1::ReplicaRecord>& replicas) {
  int total = 0, succeeded = 0, failed = 0, ended = 0, started = 0;
  for (const auto& r : replicas) {
    if (r.scaled_away()) continue;  // a scale to fewer stopped it (SPEC A17): not one of the job's any more
    ++total;
    if (r.state() == v1::ReplicaRecord::SUCCEEDED) ++succeeded;
    if (r.state() == v1::ReplicaRecord::FAILED || r.state() == v1::ReplicaRecord::STOPPED) ++failed;
    if (Ended(r.state())) ++ended;
    if (Ended(r.state()) || r.state() == v1::ReplicaRecord::RUNNING) ++started;
  }
  auto done = [](const char* status, std::string reason) { return JobOutcome{status, std::move(reason)}; };
  switch (policy) {
    case v1::ANY_SUCCEED:
      if (succeeded > 0) return done(kCompleted, "a replica succeeded (policy: any succeeds)");
      if (failed == total) return done(kFailed, "every replica failed (policy: any succeeds)");
      break;
    case v1::ALL_FAIL:
      if (failed == total) return done(kFailed, "every replica failed (policy: all fail)");
      if (ended == total) return done(kCompleted, absl::StrCat(succeeded, " of ", total, " replicas succeeded (policy: all fail)"));
      break;
    case v1::ANY_FAIL:
    case v1::ALL_SUCCEED:
    default:
      if (failed > 0) {
        return done(kFailed, absl::StrCat("a replica failed (policy: ",
                                          policy == v1::ANY_FAIL ? "any fails" : "all succeed", ")"));
      }
      if (succeeded == total) return done(kCompleted, "every replica succeeded");
      break;
  }
  return JobOutcome{started > 0 ? kRunning : kPending, ""};
}

bool RetryIfAllowed(const v1::RetryPolicy& policy, v1::ReplicaRecord* r, absl::Time now) {
  // Moves (attempts withdrawn before they started, SPEC A16) are no retries.
  const int retries = r->attempt() - r->moves();
  if (retries >= policy.max_retries()) return false;
  if (!r->center_id().empty()) r->add_failed_centers(r->center_id());
  r->set_attempt(r->attempt() + 1);
  r->set_state(v1::ReplicaRecord::WAITING);
  r->set_message(absl::StrCat("retrying (attempt ", retries + 2, " of ", policy.max_retries() + 1,
                              ") after: ", r->message()));
  r->clear_center_id();
  r->clear_exit_code();
  r->clear_dispatched_at();
  *r->mutable_restart_after() = ToTimestamp(now);
  return true;
}

}  // namespace jc::jobs
