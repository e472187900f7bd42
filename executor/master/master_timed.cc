// The master's timed jobs (SPEC B5): stored in nexec_timed_jobs, stepped every second by
// StepTimedJob (timed_jobs.cc), their runs submitted as ordinary jobs.

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/timestamp.h"
#include "executor/master/master.h"

namespace jc::nexec {

namespace {

constexpr int kMaxRetries = 100;

}  // namespace

absl::StatusOr<pb::TimedJob> Master::AddTimedJob(pb::TimedJob tj) {
  pb::JobSpec& spec = *tj.mutable_spec();
  if (spec.command().empty()) return absl::InvalidArgumentError("the timed job has no command");
  if (spec.user().empty()) return absl::InvalidArgumentError("the timed job names no user");
  if (spec.interactive() || spec.tty()) {
    return absl::InvalidArgumentError("a timed job cannot be interactive: nobody is there to type when it runs");
  }
  if (!spec.submit_key().empty()) {
    return absl::InvalidArgumentError("a timed job's runs get their own keys: --key does not apply");
  }
  spec.clear_timed_job_id();
  JC_ASSIGN_OR_RETURN(Schedule schedule, Schedule::Parse(tj.schedule()));
  tj.set_schedule(schedule.text());
  if (tj.overlap().empty()) tj.set_overlap("skip");
  if (tj.overlap() != "skip" && tj.overlap() != "queue" && tj.overlap() != "kill") {
    return absl::InvalidArgumentError(
        absl::StrCat("--overlap: expected skip, queue or kill, got \"", tj.overlap(), "\""));
  }
  if (tj.retries() < 0 || tj.retries() > kMaxRetries) {
    return absl::InvalidArgumentError(absl::StrCat("--retries: expected 0 to ", kMaxRetries, ", got ", tj.retries()));
  }
  if (tj.start_timeout_seconds() < 0) return absl::InvalidArgumentError("--start-timeout must not be negative");
  const absl::Time now = clock_->Now();
  return OnLoop([&]() -> absl::StatusOr<pb::TimedJob> {
  // Each run must be a job the cluster can take, as a submission now would be.
  JC_ASSIGN_OR_RETURN(JobRequest req, BuildRequest(spec, 0));
  JC_RETURN_IF_ERROR(scheduler_.Check(&req));
  if (spec.queue().empty()) spec.set_queue(req.queue);
  tj.set_id(next_timed_id_++);
  // Only what the caller may set: the rest is the timed job's own record.
  tj.clear_run_due_at();
  tj.clear_run_job_id();
  tj.clear_run_retries();
  tj.clear_run_killed();
  tj.clear_queued_due_at();
  tj.clear_runs();
  tj.clear_skipped();
  tj.clear_history();
  *tj.mutable_created_at() = ToTimestamp(now);
  *tj.mutable_next_run() = ToTimestamp(schedule.Next(now, options_.time_zone));
  AddTimedHistory(tj, now, options_.time_zone,
                  absl::StrCat("created for ", spec.user(), ": ", tj.schedule(), ", overlap ", tj.overlap()));
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(tj));
  // Answered once stored (with the burst).
  burst_.writes.push_back([id = tj.id(), doc = std::move(doc)](store::Transaction& txn) {
    return txn.Exec("INSERT INTO nexec_timed_jobs (id, doc) VALUES ($1, $2)", {id, doc}).status();
  });
  timed_jobs_[tj.id()] = {tj, std::move(schedule)};
  return tj;
  });
}

std::vector<pb::TimedJob> Master::ListTimedJobs() {
  return OnLoop([this] {
    std::vector<pb::TimedJob> out;
    for (const auto& [id, rec] : timed_jobs_) out.push_back(rec.tj);
    return out;
  });
}

absl::Status Master::MayControlTimedJob(const Principal& caller, int64_t id) {
  return OnLoop([&]() -> absl::Status {
    auto it = timed_jobs_.find(id);
    if (it == timed_jobs_.end()) return absl::NotFoundError(absl::StrCat("no timed job ", id));
    return ::jc::nexec::MayControl(config_, caller, it->second.tj.spec().user());
  });
}

absl::StatusOr<pb::TimedJob> Master::RemoveTimedJob(int64_t id) {
  return OnLoop([&]() -> absl::StatusOr<pb::TimedJob> {
    auto it = timed_jobs_.find(id);
    if (it == timed_jobs_.end()) return absl::NotFoundError(absl::StrCat("no timed job ", id));
    pb::TimedJob tj = std::move(it->second.tj);
    timed_jobs_.erase(it);
    burst_.writes.push_back([id](store::Transaction& txn) {
      return txn.Exec("DELETE FROM nexec_timed_jobs WHERE id = $1", {id}).status();
    });
    return tj;
  });
}

TimedRunState Master::RunState(const pb::TimedJob& tj) const {
  TimedRunState run;
  auto it = jobs_.find(tj.run_job_id());
  if (tj.run_job_id() == 0 || it == jobs_.end()) return run;
  const pb::Job& job = it->second.job;
  run.exists = true;
  run.state = pb::JobState_Name(job.state());
  run.active = job.state() == pb::PENDING || job.state() == pb::RUNNING || job.state() == pb::SUSPENDED;
  run.started = job.state() != pb::PENDING;
  // A failure is an EXIT the job came to by itself (exit code, run limit, lost host); a
  // kill by a user is not retried.
  run.failed = job.state() == pb::EXIT && job.reason().rfind("killed", 0) != 0;
  return run;
}

absl::Status Master::CheckTimedJobs() {
  struct Step {
    pb::TimedJob tj;
    std::vector<TimedAction> actions;
  };
  const absl::Time now = clock_->Now();
  std::vector<Step> steps = OnLoop([&] {
    std::vector<Step> steps;
    for (const auto& [id, rec] : timed_jobs_) {
      Step step{rec.tj, {}};
      step.actions = StepTimedJob(step.tj, rec.schedule, now, options_.time_zone, RunState(rec.tj));
      if (step.actions.empty() && step.tj.SerializeAsString() == rec.tj.SerializeAsString()) continue;
      steps.push_back(std::move(step));
    }
    return steps;
  });
  for (Step& step : steps) {
    pb::TimedJob& tj = step.tj;
    for (const TimedAction& action : step.actions) {
      if (action.kind == TimedAction::Kind::kKill) {
        auto killed = Kill(action.job_id, action.reason);
        // It may have ended meanwhile: nothing left to do then.
        if (!killed.ok() && !absl::IsFailedPrecondition(killed.status()) && !absl::IsNotFound(killed.status())) {
          return killed.status();  // tried again next second, with the record unchanged
        }
        continue;
      }
      pb::JobSpec spec = tj.spec();
      spec.set_submit_key(TimedRunKey(tj, action));
      spec.set_timed_job_id(tj.id());
      auto job_id = Submit(spec);
      if (job_id.ok()) {
        RecordRun(tj, action, *job_id, now, options_.time_zone);
      } else if (!absl::IsInvalidArgument(job_id.status()) && !absl::IsPermissionDenied(job_id.status()) &&
                 !absl::IsAlreadyExists(job_id.status()) && !absl::IsResourceExhausted(job_id.status())) {
        return job_id.status();  // the store, or a key being committed: tried again next second
      } else {
        // The cluster cannot take it now (its queue was removed, its user is no longer
        // allowed, its user has max_pend_jobs_per_user jobs pending): this run is skipped and
        // says why. Never the whole pass: one account at its cap held every other account's
        // timed jobs (attacker helper-79).
        tj.set_skipped(tj.skipped() + 1);
        AddTimedHistory(tj, now, options_.time_zone,
                        absl::StrCat("run due at ", absl::FormatTime("%Y-%m-%d %H:%M:%S", action.due, options_.time_zone),
                                     " not submitted: ", job_id.status().message()));
      }
    }
    JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(tj));
    OnLoop([&] {
      auto it = timed_jobs_.find(tj.id());
      if (it == timed_jobs_.end()) return;  // removed meanwhile: nothing to write
      burst_.writes.push_back([id = tj.id(), doc = std::move(doc)](store::Transaction& txn) {
        return txn.Exec("UPDATE nexec_timed_jobs SET doc = $2 WHERE id = $1", {id, doc}).status();
      });
      it->second.tj = std::move(tj);
    });
  }
  return absl::OkStatus();
}

absl::Status Master::RecoverTimedJobs() {
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT id, doc FROM nexec_timed_jobs ORDER BY id"));
  for (const auto& row : rows) {
    JC_ASSIGN_OR_RETURN(pb::TimedJob tj, store::DecodeDoc<pb::TimedJob>(row[1]));
    auto schedule = Schedule::Parse(tj.schedule());
    if (!schedule.ok()) {
      return absl::DataLossError(absl::StrCat("timed job ", tj.id(), " has a schedule this master cannot read: ",
                                              schedule.status().message()));
    }
    const int64_t id = tj.id();  // not in the assignment: its right side is evaluated first
    next_timed_id_ = std::max(next_timed_id_, id + 1);
    timed_jobs_[id] = {std::move(tj), *std::move(schedule)};
  }
  // A run submitted just before a crash, whose timed job was not written after it: its
  // job names the timed job, and its key the due time and retry.
  for (const auto& [id, rec] : jobs_) {
    const pb::JobSpec& spec = rec.job.spec();
    auto timed = timed_jobs_.find(spec.timed_job_id());
    if (spec.timed_job_id() == 0 || timed == timed_jobs_.end() || id <= timed->second.tj.run_job_id()) continue;
    std::vector<std::string> parts = absl::StrSplit(spec.submit_key(), '-');
    int64_t due = 0;
    int retry = 0;
    if (parts.size() != 4 || !absl::SimpleAtoi(parts[2], &due) || !absl::SimpleAtoi(parts[3], &retry)) continue;
    TimedAction action;
    action.due = absl::FromUnixSeconds(due);
    action.retry = retry;
    pb::TimedJob& tj = timed->second.tj;
    RecordRun(tj, action, id, clock_->Now(), options_.time_zone);
    if (action.due >= FromTimestamp(tj.next_run())) {
      *tj.mutable_next_run() = ToTimestamp(timed->second.schedule.Next(action.due, options_.time_zone));
    }
  }
  if (!timed_jobs_.empty()) spdlog::info("nexec master recovered {} timed jobs", timed_jobs_.size());
  return absl::OkStatus();
}

}  // namespace jc::nexec
