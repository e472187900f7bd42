#include "executor/master/timed_jobs.h"

#include "absl/strings/str_cat.h"
#include "common/timestamp.h"

namespace jc::nexec {
namespace {

std::string Clock(absl::Time t, absl::TimeZone tz) { return absl::FormatTime("%Y-%m-%d %H:%M:%S", t, tz); }

absl::Time TimeOf(const google::protobuf::Timestamp& ts) { return FromTimestamp(ts); }

}  // namespace

void AddTimedHistory(pb::TimedJob& tj, absl::Time now, absl::TimeZone tz, const std::string& line) {
  tj.add_history(absl::StrCat(Clock(now, tz), " ", line));
  constexpr int kKept = 50;
  if (tj.history_size() > kKept) tj.mutable_history()->DeleteSubrange(0, tj.history_size() - kKept);
}

std::string TimedRunKey(const pb::TimedJob& tj, const TimedAction& action) {
  return absl::StrCat("timed-", tj.id(), "-", absl::ToUnixSeconds(action.due), "-", action.retry);
}

std::vector<TimedAction> StepTimedJob(pb::TimedJob& tj, const Schedule& schedule, absl::Time now, absl::TimeZone tz,
                                      const TimedRunState& run) {
  std::vector<TimedAction> actions;
  const std::string name = absl::StrCat("timed job ", tj.id());
  bool busy = run.exists && run.active;  // a run of this timed job is unfinished
  if (run.exists && run.active && !run.started && tj.start_timeout_seconds() > 0 && !tj.run_killed() &&
      now >= TimeOf(tj.run_due_at()) + absl::Seconds(tj.start_timeout_seconds())) {
    TimedAction kill{TimedAction::Kind::kKill, tj.run_job_id()};
    kill.reason = absl::StrCat(name, ": did not start within ", absl::FormatDuration(absl::Seconds(tj.start_timeout_seconds())),
                               " of its run due at ", Clock(TimeOf(tj.run_due_at()), tz));
    AddTimedHistory(tj, now, tz, absl::StrCat("job ", tj.run_job_id(), " killed: it did not start in time"));
    tj.set_run_killed(true);
    actions.push_back(std::move(kill));
  }
  if (run.exists && !run.active && run.failed && !tj.run_killed() && tj.run_retries() < tj.retries()) {
    TimedAction retry{TimedAction::Kind::kSubmit};
    retry.due = TimeOf(tj.run_due_at());
    retry.retry = tj.run_retries() + 1;
    AddTimedHistory(tj, now, tz, absl::StrCat("job ", tj.run_job_id(), " failed: retry ", retry.retry, " of ", tj.retries()));
    actions.push_back(retry);
    busy = true;
  }
  if (!busy && tj.has_queued_due_at()) {
    TimedAction queued{TimedAction::Kind::kSubmit};
    queued.due = TimeOf(tj.queued_due_at());
    tj.clear_queued_due_at();
    actions.push_back(queued);
    busy = true;
  }
  const absl::Time due = TimeOf(tj.next_run());
  if (now < due) return actions;
  *tj.mutable_next_run() = ToTimestamp(schedule.Next(now, tz));
  const std::string due_text = Clock(due, tz);
  if (now - due > kMissedRunAfter) {
    tj.set_skipped(tj.skipped() + 1);
    AddTimedHistory(tj, now, tz, absl::StrCat("run due at ", due_text, " missed (the master was not running)"));
    return actions;
  }
  if (busy) {
    const std::string previous = run.exists && run.active ? absl::StrCat("job ", tj.run_job_id(), " is ", run.state)
                                                          : "the previous run is being submitted";
    if (tj.overlap() == "kill" && run.exists && run.active) {
      TimedAction kill{TimedAction::Kind::kKill, tj.run_job_id()};
      kill.reason = absl::StrCat(name, ": killed for its run due at ", due_text);
      AddTimedHistory(tj, now, tz, absl::StrCat("job ", tj.run_job_id(), " killed for the run due at ", due_text));
      actions.push_back(std::move(kill));
      TimedAction next{TimedAction::Kind::kSubmit};
      next.due = due;
      actions.push_back(next);
    } else if (tj.overlap() == "queue" && !tj.has_queued_due_at()) {
      *tj.mutable_queued_due_at() = ToTimestamp(due);
      AddTimedHistory(tj, now, tz, absl::StrCat("run due at ", due_text, " queued: ", previous));
    } else {
      tj.set_skipped(tj.skipped() + 1);
      AddTimedHistory(tj, now, tz, absl::StrCat("run due at ", due_text, " skipped: ", previous));
    }
    return actions;
  }
  TimedAction next{TimedAction::Kind::kSubmit};
  next.due = due;
  actions.push_back(next);
  return actions;
}

void RecordRun(pb::TimedJob& tj, const TimedAction& action, int64_t job_id, absl::Time now, absl::TimeZone tz) {
  tj.set_run_job_id(job_id);
  *tj.mutable_run_due_at() = ToTimestamp(action.due);
  tj.set_run_retries(action.retry);
  tj.set_run_killed(false);
  tj.set_runs(tj.runs() + 1);
  AddTimedHistory(tj, now, tz,
                  absl::StrCat("job ", job_id, " submitted for the run due at ", Clock(action.due, tz),
                               action.retry > 0 ? absl::StrCat(" (retry ", action.retry, ")") : ""));
}

}  // namespace jc::nexec
