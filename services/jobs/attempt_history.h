#pragma once

// Each replica attempt's history at the center it was placed on, and the trigger of its
// usage record (issue 31): an attempt is opened when it is placed, follows its center's
// reports (started, ended, how) and is closed once its center reported its end (or said it
// never had it). An attempt that ran asks, as it closes, for its usage record: the job
// manager writes that record in the transaction that writes the closed attempt, so each
// attempt that ran has exactly one record, whatever is replayed after a crash. Reports of
// an attempt the replica moved past (a retry, a gang requeue) or of a job that already
// ended still count: a stopped attempt is billed too. Pure functions, like job_state.h.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "services/jobs/job_state.h"

namespace jc::jobs {

// The replica at `index` was just placed at its center_id (its current attempt).
void NotePlaced(v1::JobRecord& job, int index, absl::Time now);
// Its current attempt's data and image reached its center now (staging ended).
void NoteStaged(v1::JobRecord& job, int index, absl::Time now);

// `center` reported `report` on one attempt of the replica at `index`. The attempt must
// be one placed at that center: a report from another center changes nothing (false).
bool ApplyAttemptReport(v1::JobRecord& job, int index, const std::string& center, const apb::Replica& report,
                        absl::Time now, JobEffects* fx);

// `center` does not know `attempt` of the replica at `index`: it never ran there (or, with
// `why`, its center forgot it). Closed without a record.
void ApplyAttemptUnknown(v1::JobRecord& job, int index, const std::string& center, int attempt, absl::Time now,
                         JobEffects* fx, const std::string& why = "");

// The current attempt of the replica at `index` could not start (its center refused it,
// its staging failed): closed without a record.
void CloseNeverStarted(v1::JobRecord& job, int index, const std::string& why, absl::Time now);

// The control plane stopped the replica's current attempt now: its center's report of
// the end is awaited from here on.
void NoteStopped(v1::ReplicaRecord& replica, absl::Time now);
// The control plane gave the current attempt up (its center lost, `why`): said in its
// history, before and after whatever its center says of its end.
inline constexpr char kGivenUp[] = "given up: ";
void NoteGivenUp(v1::ReplicaRecord& replica, const std::string& why);

// Attempts the control plane stopped whose center has not reported their end within
// `grace`: closed with the control plane's own times — a record (source "control_plane")
// when it was seen started, none otherwise. A report from the center later corrects it.
void CloseOverdue(v1::JobRecord& job, absl::Time now, absl::Duration grace, JobEffects* fx);

// Attempts placed whose end is not accounted for yet (running ones included).
std::vector<AttemptRef> OpenAttempts(const v1::JobRecord& job);

// An ended job whose attempts at centers have not all reported their end: it stays in the
// job manager's memory (and is reloaded after a restart) until they have.
bool AwaitsUsage(const v1::JobRecord& job);

// Whether `report` says the attempt was withdrawn before it started and the control plane
// had asked for that (a center's "withdrawn" unasked is a plain stop).
bool WithdrawnAsAsked(const v1::AttemptRecord& attempt, const apb::Replica& report);

// Whether the attempt record ran at its center (a usage record is due when it ends).
bool Ran(const v1::AttemptRecord& attempt);

}  // namespace jc::jobs
