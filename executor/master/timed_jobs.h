#pragma once

// Timed jobs (SPEC B5, SkyForm AIP's 定时作业): what one timed job does at a moment —
// submit its next run, retry a failed one, kill a run that did not start in time or that
// the next run replaces. Pure logic over the timed job's record and its current run's
// state, so the master only carries the actions out (and tests need no clock but `now`).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "executor/policy/schedule.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

// The current run's job as the master knows it.
struct TimedRunState {
  bool exists = false;   // there is a current run and its job is known
  bool active = false;   // pending, running or suspended
  bool started = false;  // has been dispatched (not pending)
  bool failed = false;   // ended EXIT, not killed by a user or the timed job
  std::string state;     // PENDING, RUNNING, DONE, EXIT... for history lines
};

struct TimedAction {
  enum class Kind { kKill, kSubmit };
  Kind kind = Kind::kSubmit;
  int64_t job_id = 0;       // kKill: the run to end
  absl::Time due;           // kSubmit: the due time the run is for
  int retry = 0;            // kSubmit: 0 for a run's first job, n for its n-th retry
  std::string reason;       // kKill: the job's reason
};

// A run due longer ago than this (the master was down) is skipped, not submitted late.
inline constexpr absl::Duration kMissedRunAfter = absl::Minutes(1);

// Decides what `tj` does at `now` and updates its record (next run, queued run, counts,
// history); the caller carries the actions out in order (kills first) and then records
// each submission with RecordRun.
std::vector<TimedAction> StepTimedJob(pb::TimedJob& tj, const Schedule& schedule, absl::Time now, absl::TimeZone tz,
                                      const TimedRunState& run);
// A run submitted for `action`: it is the current run now.
void RecordRun(pb::TimedJob& tj, const TimedAction& action, int64_t job_id, absl::Time now, absl::TimeZone tz);
// The submission key of a run: resubmitting after a crash finds the job already made.
std::string TimedRunKey(const pb::TimedJob& tj, const TimedAction& action);
// A history line stamped with `now`; keeps the last 50.
void AddTimedHistory(pb::TimedJob& tj, absl::Time now, absl::TimeZone tz, const std::string& line);

}  // namespace jc::nexec
