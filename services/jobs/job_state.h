#pragma once

// The job state machine: pure functions of a job record and one event (an adapter's report
// of a replica, the answer to a submit, an attempt that could not start, a stop request)
// that move the record to its next state and say what must follow: stops at centers,
// reservations to release, whether the job waits to be placed, whether it just ended.
// No I/O, no locks, no clock of its own (time is an argument): the job manager applies the
// effects only after the record's write has committed (docs/adr/0006), and the golden
// tests in tests/unit/jobs/ drive it with event sequences.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "jointcloud/adapter/v1/adapter.pb.h"
#include "jointcloud/v1/job_record.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;
namespace apb = ::jointcloud::adapter::v1;

// One attempt of one replica, as the centers know it.
struct AttemptRef {
  std::string center_id;
  int task_index = 0;
  int replica_index = 0;
  int attempt = 0;
  bool operator==(const AttemptRef&) const = default;
};

// An attempt that ran and just ended: its usage record is due (attempt_history.h).
struct MeteredAttempt {
  int index = 0;              // the replica
  v1::AttemptRecord attempt;  // as it closed
  apb::ReplicaUsage usage;    // as its center measured it (all zero: it said nothing)
  // The control plane's own estimate (its center never reported the end in the grace).
  bool estimated = false;
  // The center's report after such an estimate: a record that corrects it, carrying the
  // difference (so sums over records come to the center's figures); `estimate` is the
  // attempt as the estimate was written.
  bool correction = false;
  v1::AttemptRecord estimate;
};

struct JobEffects {
  bool changed = false;                // the record changed: write it
  std::vector<AttemptRef> stop;        // stop these attempts at their centers (after the write)
  std::vector<AttemptRef> release;     // their reservations leave the scheduler's view
  std::vector<AttemptRef> reported;    // their center accepted them: its usage will show them
  // When the center's acceptance came (its answer's arrival, not when the loop got to it): a
  // usage report asked for after it counts them, one asked for before it may not.
  absl::Time reported_at = absl::InfiniteFuture();
  // Per `reported`, in its order: when the center accepted it by its adapter's clock (the
  // answer's submitted_at; InfiniteFuture when it did not say). A usage the center measured
  // from then on counts it, whenever it was asked for (adapter.proto, Usage.at).
  std::vector<absl::Time> center_accepted_at;
  bool wait = false;                   // replicas wait to be placed: the job (re)enters the queue
  bool handed_over = false;            // every replica reached its center just now (t_s is set)
  std::string ended;                   // "completed" or "failed" when the job ended with this event
  std::vector<MeteredAttempt> metered;  // write their usage records with the job
};

// Since when the job has waited to be placed: its longest-waiting replica's wait — from the
// submission for a replica that never ran, from when it fell due for a service's replica
// that restarts or was added by a scale (SPEC A17) and for a retried one — so a service
// submitted days ago is not overdue each time it restarts, a retry's run is not counted
// as waiting, and a sibling's restart does not reset a replica that has waited hours.
absl::Time WaitingSince(const v1::JobRecord& job);

// An adapter's view of the replica at `index` (an event, a poll, the answer to a submit).
// Reports of another attempt, of an ended replica, or that would move a replica back, are
// ignored (duplicated and reordered events change nothing).
void ApplyReport(v1::JobRecord& job, int index, const apb::Replica& report, absl::Time now, JobEffects* fx);

// The replica's center no longer has its current attempt and says it may have forgotten it
// (it forgets a replica its replica_retention after it ended: GetReplica's answer marked
// forgotten), and the job manager believes it (a batch replica acknowledged a day ago or
// more): it ended while the control plane had no word of it, how is unknown. It fails for
// good with `why` (a gang's other replicas are each asked of their own), never submitted
// again: it may have run to its end already.
void ApplyForgotten(v1::JobRecord& job, int index, const std::string& why, absl::Time now, JobEffects* fx);

// The center accepted the submit of the replica at `index` and answered `answer`.
void ApplySubmitAccepted(v1::JobRecord& job, int index, const apb::Replica& answer, absl::Time now,
                         JobEffects* fx);

// The attempt at `index` could not start (its submit was refused, its staging failed): it is
// retried as the retry policy allows, or fails. A gang's other replicas are stopped and wait
// with it, each as a new attempt, so the gang starts whole.
void ApplyAttemptFailedToStart(v1::JobRecord& job, int index, const std::string& why, absl::Time now,
                               JobEffects* fx);

// The centers that refused an attempt of the replica and are still held as refused at
// `now`: each for scheduler::kRefusalHold after its own latest refusal
// (ReplicaRecord.refused_centers, refusal_times).
std::vector<std::string> HeldRefusals(const v1::ReplicaRecord& r, absl::Time now);

// The control plane decided to move the replica at `index` (PENDING at its center, SPEC
// A16): its current attempt records the ask (`why`), written before the withdrawal is sent
// to the center. False (nothing changed) when the replica is not waiting at a center.
bool AskWithdraw(v1::JobRecord& job, int index, const std::string& why, absl::Time now, JobEffects* fx);

// Its center took the attempt at `index` back before it started, as asked: the attempt is
// closed "withdrawn" (no usage), the replica waits to be placed again as a new attempt (a
// move, not a retry), and a gang's other replicas go with it. Called by ApplyReport for a
// report that says so; a report of "withdrawn" for an attempt never asked is a plain stop.
void ApplyWithdrawn(v1::JobRecord& job, int index, absl::Time now, JobEffects* fx);

// The user stopped the job.
void ApplyStopRequested(v1::JobRecord& job, absl::Time now, JobEffects* fx);

// The user scaled task `task_index` of a service or streaming job to `replicas` replicas
// (SPEC A17; validate_create.h CheckScale says whether it may). More: the new replicas wait
// to be placed, each a new attempt (one scaled away before starts again under its index).
// Fewer: the highest-numbered stop (their attempts at centers are stopped, and metered as
// any other) and are marked scaled away: the status policy no longer counts them. The
// task's replica_number in the request becomes `replicas`.
void ApplyScale(v1::JobRecord& job, int task_index, int replicas, absl::Time now, JobEffects* fx);

// The center of the replica at `index` is lost (SPEC A17: gone from the registry or
// unavailable, its adapter unreachable, past the job manager's --center_lost_grace): a
// service's or stream's replica starts again elsewhere as a new attempt (after its back-off,
// its old center avoided), an interactive job's replica fails with `why` (its session is
// gone), one being stopped is stopped. The old attempt is stopped at its center whenever
// that answers again. Batch replicas are left to their center's word (unchanged).
void ApplyCenterLost(v1::JobRecord& job, int index, const std::string& why, absl::Time now, JobEffects* fx);

// The job's replicas can never be placed (its spec or image left the catalog).
void ApplyUnplaceable(v1::JobRecord& job, const std::string& why, absl::Time now, JobEffects* fx);

// Decides the job's status by its status policy; when it ended, says which replica decided
// a failure and stops whatever still runs. Every Apply* above ends with it.
void Settle(v1::JobRecord& job, absl::Time now, JobEffects* fx);

// Records t_s once every replica has reached its center.
void NoteHandedOver(v1::JobRecord& job, absl::Time now, JobEffects* fx);

AttemptRef AttemptOf(const v1::ReplicaRecord& replica);

// The adapter's key of the current attempt of the replica at `index` of `job`.
apb::ReplicaKey ReplicaKeyOf(const v1::JobRecord& job, int index);

}  // namespace jc::jobs
