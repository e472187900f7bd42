// Suspension and resumption (SPEC B5, B6), by users and by the system: run windows that
// close and open, hosts past a load threshold, preemptions decided by a scheduling cycle
// (suspend, or SIGTERM then requeue). What each does to the job is the state machine's
// (job_state.h); here the checks that decide it and the calls to the agents.

#include <spdlog/spdlog.h>

#include <csignal>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/timestamp.h"
#include "executor/master/master.h"

namespace jc::nexec {

void Master::CarryOutPreemptions(const std::vector<PreemptionCall>& preemptions, const std::vector<int64_t>& resumes) {
  for (const auto& [p, fx] : preemptions) {
    absl::Status done;
    if (p.requeue) {
      const std::optional<SignalTargets> found = OnLoop([&]() -> std::optional<SignalTargets> {
        auto it = jobs_.find(p.victim);
        if (it == jobs_.end()) return std::nullopt;
        return TargetsOf(it->second.job);
      });
      if (!found.has_value()) continue;  // it ended and was cleaned meanwhile
      const SignalTargets& targets = *found;
      const pb::Job& job = targets.job;
      if (fx.signal.has_value()) {
        done = SignalTasks(targets, *fx.signal);  // no grace: SIGKILL now
      } else if (fx.term_first_task) {
        pb::SignalRequest s;
        s.set_job_id(job.id());
        s.set_task_index(0);
        s.set_action(pb::SignalRequest::SIGNAL);
        s.set_signal(SIGTERM);
        done = job.tasks().empty() ? absl::FailedPreconditionError("the job has no tasks")
                                   : dialer_->Signal(targets.addresses.at(job.tasks(0).host()), s);
      }
    } else {
      done = SuspendJob(p.victim, p.reason).status();
    }
    if (done.ok()) {
      spdlog::info("nexec job {} {}: {}", p.victim, p.requeue ? "being requeued" : "suspended", p.reason);
      continue;
    }
    // Not carried out (it ended meanwhile, its agent is gone): the victim keeps its
    // resources and the preemptor tries again in a later cycle.
    spdlog::warn("nexec job {}: preemption for job {} not carried out: {}", p.victim, p.preemptor, done.ToString());
    OnLoop([&] {
      auto it = jobs_.find(p.victim);
      if (it == jobs_.end()) return;  // it ended and was cleaned meanwhile
      JobRecord& rec = it->second;
      ApplyEffects(rec, job_state::PreemptionNotCarriedOut(rec, p.preemptor, p.requeue, std::string(done.message()), Now()));
    });
  }
  for (int64_t id : resumes) {
    absl::Status done = ResumeJob(id, true).status();
    if (done.ok()) {
      spdlog::info("nexec job {} resumed: the slots it lent are free again", id);
    } else {
      spdlog::warn("nexec job {}: resuming after preemption failed: {}", id, done.ToString());
    }
  }
  Wake();  // what was freed lets the preemptors start
}

absl::StatusOr<pb::Job> Master::Suspend(int64_t id) {
  absl::StatusOr<pb::Job> job = SuspendJob(id, "");
  if (!job.ok()) return UnlessCleaned(job.status(), id, "suspended");
  return job;
}

absl::StatusOr<pb::Job> Master::Resume(int64_t id) {
  absl::StatusOr<pb::Job> job = ResumeJob(id, false);
  if (!job.ok()) return UnlessCleaned(job.status(), id, "resumed");
  return job;
}

absl::StatusOr<pb::Job> Master::SuspendJob(int64_t id, const std::string& system_reason) {
  job_state::Effects asked;
  JC_ASSIGN_OR_RETURN(SignalTargets targets, OnLoop([&]() -> absl::StatusOr<SignalTargets> {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
    JC_ASSIGN_OR_RETURN(asked, job_state::AskSuspend(it->second, system_reason, Now()));
    ApplyEffects(it->second, asked);
    // Taken over from the system (already stopped): written now, nothing to signal.
    if (!asked.signal.has_value()) MarkDirty(id);
    return TargetsOf(it->second.job);
  }));
  if (!asked.signal.has_value()) return targets.job;
  JC_RETURN_IF_ERROR(SignalTasks(targets, *asked.signal));
  return OnLoop([&]() -> absl::StatusOr<pb::Job> {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return targets.job;  // it ended and was cleaned meanwhile
    JobRecord& rec = it->second;
    if (rec.job.state() != pb::RUNNING || rec.job.attempt() != targets.job.attempt()) {
      return rec.job;  // it ended (or was requeued) meanwhile; nothing left to mark
    }
    ApplyEffects(rec, job_state::Suspended(rec, system_reason, Now()));
    MarkDirty(id);
    cycle_wanted_ = true;  // what the suspension released may let a waiting job start
    return rec.job;
  });
}

absl::StatusOr<pb::Job> Master::ResumeJob(int64_t id, bool by_system) {
  JC_ASSIGN_OR_RETURN(SignalTargets targets, OnLoop([&]() -> absl::StatusOr<SignalTargets> {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
    JC_RETURN_IF_ERROR(job_state::AskResume(it->second, by_system));
    return TargetsOf(it->second.job);
  }));
  JC_RETURN_IF_ERROR(SignalTasks(targets, pb::SignalRequest::RESUME));
  return OnLoop([&]() -> absl::StatusOr<pb::Job> {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return targets.job;  // it ended and was cleaned meanwhile
    JobRecord& rec = it->second;
    if (rec.job.state() != pb::SUSPENDED || rec.job.attempt() != targets.job.attempt()) return rec.job;
    ApplyEffects(rec, job_state::Resumed(rec, Now()));
    MarkDirty(id);
    return rec.job;
  });
}

void Master::ApplyWindows(absl::Time now) {
  for (const QueueConfig& q : config_.queues) {
    // A queue joins the scheduler once every host it names is known; until then it holds
    // no job, and the first cycle after it joins applies its window before placing any.
    if (!scheduler_.HasQueue(q.name)) continue;
    if (q.run_window.always_open() && scheduler_.QueueOpen(q.name)) continue;
    if (absl::Status s = scheduler_.SetQueueOpen(q.name, q.run_window.Contains(now, options_.time_zone)); !s.ok()) {
      spdlog::error("queue {} has a run window but is unknown to the scheduler: {}", q.name, s.ToString());
    }
  }
}

absl::StatusOr<int> Master::CheckRunWindows() {
  struct Action {
    int64_t id;
    enum { kSuspend, kResume, kKill, kRequeue } what;
    std::string why;
  };
  std::vector<Action> actions = OnLoop([&] {
    std::vector<Action> actions;
    ApplyWindows(clock_->Now());
    std::map<std::string, const QueueConfig*> by_name;
    for (const QueueConfig& q : config_.queues) by_name[q.name] = &q;
    const absl::Time now = clock_->Now();
    for (int64_t id : active_) {
      const JobRecord& rec = jobs_.at(id);
      if (rec.asked == job_state::Asked::kRequeue && rec.preempt_kill_at <= now &&
          (rec.job.state() == pb::RUNNING || rec.job.state() == pb::SUSPENDED)) {
        actions.push_back({id, Action::kRequeue, "its preemption grace is over"});
        continue;
      }
      if (rec.asked == job_state::Asked::kNothing && rec.request.run_limit > absl::ZeroDuration() && rec.job.has_started_at() &&
          FromTimestamp(rec.job.started_at()) + rec.request.run_limit <= now) {
        actions.push_back({id, Action::kKill,
                           absl::StrCat("run limit ", absl::FormatDuration(rec.request.run_limit), " reached")});
        continue;
      }
      // A job suspended for a preemption resumes when the scheduler gives its slots back.
      if (rec.asked != job_state::Asked::kNothing || rec.job.preempted_by() != 0) continue;
      auto q = by_name.find(rec.request.queue);
      const QueueConfig* queue = q == by_name.end() ? nullptr : q->second;
      // Why the system holds it stopped now: its queue's run window is closed, or a
      // host of its is past a stop threshold — or, once stopped for load, still past a
      // scheduling one (LSF resumes only when the load is back under loadSched).
      std::string why;
      bool from_stop = false;
      if (!scheduler_.QueueOpen(rec.request.queue)) {
        why = absl::StrCat("queue ", rec.request.queue, " is outside its run window (",
                           queue == nullptr ? "" : queue->run_window.text(), ")");
      } else {
        const bool stopped_for_load = rec.job.state() == pb::SUSPENDED &&
                                      absl::StrContains(rec.job.system_suspend_reason(), " threshold ");
        std::set<std::string> hosts;
        for (const pb::Task& t : rec.job.tasks()) hosts.insert(t.host());
        for (const std::string& host : hosts) {
          why = scheduler_.LoadThresholdExceeded(host, rec.request.queue, /*stop=*/true);
          from_stop = !why.empty();
          if (why.empty() && stopped_for_load) why = scheduler_.LoadThresholdExceeded(host, rec.request.queue, false);
          if (!why.empty()) break;
        }
      }
      if (rec.job.state() == pb::RUNNING && !why.empty()) {
        bool kill = from_stop && queue != nullptr && queue->threshold_kills;
        actions.push_back({id, kill ? Action::kKill : Action::kSuspend, why});
      } else if (rec.job.state() == pb::SUSPENDED && !rec.job.system_suspend_reason().empty() && why.empty()) {
        actions.push_back({id, Action::kResume, ""});
      }
    }
    return actions;
  });
  int changed = 0;
  absl::Status first = absl::OkStatus();
  for (const Action& a : actions) {
    absl::Status done;
    if (a.what == Action::kSuspend) {
      done = SuspendJob(a.id, a.why).status();
      if (done.ok()) spdlog::info("nexec job {} suspended: {}", a.id, a.why);
    } else if (a.what == Action::kResume) {
      done = ResumeJob(a.id, true).status();
      if (done.ok()) spdlog::info("nexec job {} resumed: what held it is over", a.id);
    } else if (a.what == Action::kRequeue) {
      OnLoop([&] {  // SIGKILL once
        if (auto it = jobs_.find(a.id); it != jobs_.end()) it->second.preempt_kill_at = absl::InfiniteFuture();
      });
      done = Requeue(a.id).status();
      if (done.ok()) spdlog::info("nexec job {} killed to be requeued: {}", a.id, a.why);
    } else {
      OnLoop([&] {
        auto it = jobs_.find(a.id);
        if (it == jobs_.end()) return;  // it ended and was cleaned meanwhile: Kill says so
        it->second.killed_because = absl::StrCat("killed: ", a.why);
        it->second.job.add_history(absl::StrCat(Stamp(), " killed: ", a.why));
      });
      done = Kill(a.id).status();
      if (done.ok()) spdlog::info("nexec job {} killed: {}", a.id, a.why);
    }
    if (done.ok()) {
      ++changed;
    } else if (first.ok()) {
      first = done;  // tried again at the next check
    }
  }
  if (!first.ok()) return first;
  return changed;
}

}  // namespace jc::nexec
