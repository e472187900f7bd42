#include "executor/master/job_state.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/timestamp.h"

namespace jc::nexec::job_state {

namespace pb = ::nexec::v1;

namespace {

// An allocation the job holds now: not a remote task, not one an elastic job gave back.
bool Held(const pb::Task& t) { return !t.remote() && !(t.grown() && t.state() == pb::TASK_EXITED); }

// The reason a launch not confirmed leaves, until the agent confirms it or reports the task.
constexpr absl::string_view kUnconfirmed = "launch on ";
void Confirmed(pb::Job& job) {
  if (absl::StartsWith(job.reason(), kUnconfirmed)) job.clear_reason();
}

absl::Status NotAllowed(const pb::Job& job, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat("job ", job.id(), " is ", pb::JobState_Name(job.state()), what));
}

}  // namespace

std::string At::Stamp() const { return absl::FormatTime("%Y-%m-%d %H:%M:%S", now, zone); }

Outcome AfterFirstTaskEnded(const FirstTaskEnded& e) {
  using Kind = Outcome::Kind;
  if (e.pre_exec_failed && e.asked == Asked::kNothing) {
    // As LSF: the host was not ready for the job; it goes back to the queue, and ends after
    // the queue's number of retries.
    if (e.pre_exec_failures <= e.pre_exec_retries) return {Kind::kRequeue, pb::PENDING, 0, absl::StrCat(e.message, "; requeued")};
    return {Kind::kFinish, pb::EXIT, e.exit_code,
            absl::StrCat(e.message, "; ended after ", e.pre_exec_retries, " requeue(s)")};
  }
  if (e.asked == Asked::kRequeue) {
    return {Kind::kRequeue, pb::PENDING, 0, e.preempted.empty() ? "requeued by user" : absl::StrCat(e.preempted, "; requeued")};
  }
  if (e.asked == Asked::kKill) {
    return {Kind::kFinish, pb::EXIT, e.exit_code, e.killed_because.empty() ? "killed by user" : e.killed_because};
  }
  if (e.exit_code == 0) return {Kind::kFinish, pb::DONE, 0, ""};
  return {Kind::kFinish, pb::EXIT, e.exit_code,
          e.killed_because.empty() ? absl::StrCat("exited with ", e.exit_code) : e.killed_because};
}

Outcome AfterHostLost(bool rerun_on_host_failure, const std::string& where) {
  if (rerun_on_host_failure) return {Outcome::Kind::kRequeue, pb::PENDING, 0, absl::StrCat(where, "; rerun")};
  return {Outcome::Kind::kFinish, pb::EXIT, 128 + 9, where};  // as if SIGKILLed with its host
}

Effects Finish(Tracked& t, pb::JobState state, int exit_code, const std::string& reason, const At& at) {
  Effects fx;
  fx.write = true;
  fx.scheduler = t.job.state() == pb::PENDING ? SchedulerStep::kCancel : SchedulerStep::kRelease;
  fx.freed = t.job.state() != pb::PENDING;
  t.job.set_state(state);
  t.job.set_exit_code(exit_code);
  if (!reason.empty()) t.job.set_reason(reason);
  *t.job.mutable_ended_at() = ToTimestamp(at.now);
  t.job.clear_requeue_at();
  t.asked = Asked::kNothing;
  t.preempt_kill_at = absl::InfiniteFuture();
  return fx;
}

Effects Requeue(Tracked& t, const std::string& reason, const At& at) {
  Effects fx;
  fx.write = true;
  if (t.job.state() == pb::PENDING) {  // already waiting in its queue
    t.job.set_reason(reason);
    return fx;
  }
  fx.scheduler = SchedulerStep::kRequeue;
  fx.freed = true;
  t.job.set_state(pb::PENDING);
  t.job.set_attempt(t.job.attempt() + 1);
  t.job.clear_tasks();
  t.job.clear_resize_events();  // a new attempt starts with its minimum again
  t.job.clear_started_at();
  t.job.set_reason(reason);
  t.job.clear_preempted_by();
  t.job.clear_requeue_at();
  t.asked = Asked::kNothing;
  t.preempt_kill_at = absl::InfiniteFuture();
  return fx;
}

void RequeueRefused(Tracked& t, const std::string& why) {
  t.job.set_state(pb::EXIT);
  t.job.set_reason(absl::StrCat(t.job.reason(), "; cannot be queued again: ", why));
}

Effects Submitted(Tracked& t, int64_t id, pb::JobSpec spec, const At& at) {
  t.job.Clear();
  t.job.set_id(id);
  *t.job.mutable_spec() = std::move(spec);
  t.job.set_state(pb::PENDING);
  *t.job.mutable_submitted_at() = ToTimestamp(at.now);
  Effects fx;
  fx.write = true;
  fx.scheduler = SchedulerStep::kQueue;
  return fx;
}

void QueueRefused(Tracked& t, const std::string& why) {
  t.job.set_state(pb::EXIT);
  t.job.set_reason(absl::StrCat("cannot be queued: ", why));
}

Effects Apply(Tracked& t, const Outcome& outcome, const At& at) {
  if (outcome.kind == Outcome::Kind::kRequeue) return Requeue(t, outcome.reason, at);
  return Finish(t, outcome.state, outcome.exit_code, outcome.reason, at);
}

Effects Dispatch(Tracked& t, std::vector<pb::Task> tasks, int64_t backfilled_before, absl::Duration run_limit,
                 const At& at) {
  pb::Job& job = t.job;
  if (backfilled_before != 0) {
    job.add_history(absl::StrCat(at.Stamp(), " backfilled: on slots reserved for job ", backfilled_before,
                                 ", ending (run limit ", absl::FormatDuration(run_limit),
                                 ") before that job starts"));
  }
  job.set_state(pb::RUNNING);
  job.clear_tasks();
  job.clear_reason();
  *job.mutable_started_at() = ToTimestamp(at.now);
  job.clear_resize_events();
  int index = 0;
  for (pb::Task& task : tasks) {
    task.set_index(index);
    task.set_state(index == 0 ? pb::TASK_STARTING : pb::TASK_RUNNING);
    *job.add_tasks() = std::move(task);
    ++index;
  }
  t.launch_in_flight = true;
  t.seen_by_agent = false;
  t.launch_accepted = false;
  t.unreported_heartbeats = 0;
  Effects fx;
  fx.write = true;  // the decision is stored before the task starts
  fx.launch = !job.tasks().empty();
  return fx;
}

Effects LaunchAnswered(Tracked& t, int attempt, const absl::StatusOr<int>& pid, const At& at) {
  if (t.job.attempt() != attempt || t.job.tasks().empty() || Ended(t.job.state())) return {};
  t.launch_in_flight = false;
  if (pid.ok()) {
    t.launch_accepted = true;
    t.unreported_heartbeats = 0;
    pb::Task* t0 = t.job.mutable_tasks(0);
    if (t0->state() == pb::TASK_STARTING) {
      t0->set_state(pb::TASK_RUNNING);
      t0->set_pid(*pid);
    }
    Confirmed(t.job);
    return {};
  }
  if (absl::IsInvalidArgument(pid.status()) || absl::IsFailedPrecondition(pid.status()) ||
      absl::IsPermissionDenied(pid.status())) {
    // The job itself cannot start (unknown user, unwritable output): retrying elsewhere
    // would fail the same way.
    return Finish(t, pb::EXIT, 127, absl::StrCat("cannot start: ", pid.status().message()), at);
  }
  if (absl::IsAborted(pid.status())) {
    // The agent refused it outright (it serves another master's store): it never ran
    // there, so it goes back to its queue as a new attempt, and runs where it can.
    const std::string why = absl::StrCat(t.job.tasks(0).host(), " refused the launch of attempt ", t.job.attempt(),
                                         ": ", pid.status().message(), "; requeued as a new attempt");
    t.job.add_history(absl::StrCat(at.Stamp(), " ", why));
    return Requeue(t, why, at);
  }
  // The launch may have reached the agent before the call failed (its connection closed,
  // the agent died): requeueing as a new attempt could run the job twice. The attempt stays;
  // the agent's next heartbeat reports it, or it was never seen there and the same attempt
  // is sent again (an agent runs an attempt at most once, across its own restarts too), or
  // the host times out and the queue's rule applies.
  t.job.set_reason(absl::StrCat(kUnconfirmed, t.job.tasks(0).host(), " not confirmed (", pid.status().message(),
                                "); waiting for the agent"));
  return {};
}

Effects TaskReported(Tracked& t, const pb::TaskReport& r, const std::string& host, int pre_exec_retries,
                     const At& at) {
  Effects fx;
  pb::Job& job = t.job;
  const bool current = !Ended(job.state()) && job.state() != pb::PENDING && job.attempt() == r.attempt();
  if (!current) {
    fx.kill_report = r.state() != pb::TASK_EXITED;  // a stray: end it
    return fx;
  }
  if (r.task_index() < 0 || r.task_index() >= job.tasks_size()) return fx;
  pb::Task* task = job.mutable_tasks(r.task_index());
  if (r.task_index() != 0 && (!task->remote() || task->state() == pb::TASK_EXITED)) return fx;
  if (r.has_usage()) fx.cpu_seconds = std::max(0.0, r.usage().cpu_seconds() - task->usage().cpu_seconds());
  if (r.pid() != 0) task->set_pid(r.pid());
  if (r.has_usage()) *task->mutable_usage() = r.usage();
  if (r.task_index() != 0) {
    // A remote task: its own state, usage and exit; the job goes on (task 0 decides).
    if (r.state() != pb::TASK_EXITED && job.spec().max_slots() > 0) {
      // Elastic: on a host the job gave back, its remote tasks end (the kill sent then did
      // not arrive).
      fx.kill_report = std::none_of(job.tasks().begin(), job.tasks().end(),
                                    [&](const pb::Task& a) { return Held(a) && a.host() == task->host(); });
    }
    if (r.state() == pb::TASK_EXITED) {
      task->set_state(pb::TASK_EXITED);
      task->set_exit_code(r.exit_code());
      fx.write = true;
    } else if (task->state() == pb::TASK_STARTING) {
      task->set_state(pb::TASK_RUNNING);
    }
    return fx;
  }
  t.seen_by_agent = true;
  Confirmed(job);
  if (r.state() != pb::TASK_EXITED) {
    if (task->state() == pb::TASK_STARTING) task->set_state(pb::TASK_RUNNING);
    if (r.events_written() < job.resize_events_size()) {
      pb::SignalRequest notify;
      notify.set_job_id(job.id());
      notify.set_action(pb::SignalRequest::NOTIFY);
      *notify.mutable_events() = job.resize_events();
      fx.notify = std::move(notify);
    }
    return fx;
  }
  task->set_state(pb::TASK_EXITED);
  task->set_exit_code(r.exit_code());
  FirstTaskEnded ended;
  ended.exit_code = r.exit_code();
  ended.pre_exec_failed = r.pre_exec_failed();
  ended.message = r.message();
  ended.asked = t.asked;
  ended.killed_because = t.killed_because;
  if (job.preempted_by() != 0 && t.asked == Asked::kRequeue) ended.preempted = job.reason();
  ended.pre_exec_retries = pre_exec_retries;
  if (ended.pre_exec_failed && ended.asked == Asked::kNothing) {
    job.add_history(absl::StrCat(at.Stamp(), " attempt ", job.attempt(), " on ", host, ": ", r.message()));
    // Counted from the history, which is stored: a restarted master counts on.
    ended.pre_exec_failures = static_cast<int>(std::count_if(
        job.history().begin(), job.history().end(),
        [](const std::string& h) { return h.find(": pre-exec ") != std::string::npos; }));
  }
  Effects end = Apply(t, AfterFirstTaskEnded(ended), at);
  end.cpu_seconds = fx.cpu_seconds;
  return end;
}

Effects NotReported(Tracked& t, bool rerun_on_host_failure, const std::string& host, const At& at) {
  if (t.job.state() != pb::RUNNING && t.job.state() != pb::SUSPENDED) return {};
  if (t.launch_in_flight) return {};
  if (!t.seen_by_agent && t.launch_accepted) {
    // Accepted, yet never among the tasks the agent runs or ended: it answered from its
    // memory of an attempt of that number it had already run (a restored store reusing
    // job numbers). Nothing runs for it: a new attempt, which the agent has never seen.
    if (++t.unreported_heartbeats < kLostAfterHeartbeats) return {};
    const std::string why = absl::StrCat("lost: ", host, " accepted the launch of attempt ", t.job.attempt(),
                                         " but never reported it (", kLostAfterHeartbeats,
                                         " heartbeats); requeued as a new attempt");
    t.job.add_history(absl::StrCat(at.Stamp(), " ", why));
    return Requeue(t, why, at);
  }
  if (!t.seen_by_agent && t.asked == Asked::kKill) {
    // Killed while its launch was unconfirmed: the agent answered the kill that it does not
    // run the task, and this heartbeat, with no launch in flight, shows it never started.
    // It ends here rather than being sent again (its kill answered "does not run on" and
    // the job lived on: attacker helper-60). Were it started after all, the agent's next
    // heartbeat reports a task of an ended job, which the master has it kill.
    return Finish(t, pb::EXIT, 130,
                  t.killed_because.empty() ? absl::StrCat("killed before ", host, " started it") : t.killed_because,
                  at);
  }
  if (!t.seen_by_agent) {
    t.launch_in_flight = true;
    Effects fx;
    fx.launch = true;
    return fx;
  }
  return HostLost(t, rerun_on_host_failure, absl::StrCat("task lost on ", host), at);
}

Effects EndedByAgentRestart(Tracked& t, const pb::TaskReport& r, bool rerun_on_host_failure, const std::string& host,
                            int pre_exec_retries, const At& at) {
  const bool current_first_task = r.task_index() == 0 && r.state() == pb::TASK_EXITED &&
                                  (t.job.state() == pb::RUNNING || t.job.state() == pb::SUSPENDED) &&
                                  t.job.attempt() == r.attempt();
  if (!current_first_task || !r.ended_by_agent_restart()) return TaskReported(t, r, host, pre_exec_retries, at);
  return HostLost(t, rerun_on_host_failure, absl::StrCat("task ended by the restart of its agent on ", host), at);
}

Effects HostLost(Tracked& t, bool rerun_on_host_failure, const std::string& where, const At& at) {
  if (t.job.state() != pb::RUNNING && t.job.state() != pb::SUSPENDED) return {};
  // Whatever still runs of it elsewhere is stopped by the agents' next heartbeat (the
  // master tells them the attempt is stale).
  return Apply(t, AfterHostLost(rerun_on_host_failure, where), at);
}

absl::StatusOr<Effects> AskKill(Tracked& t, const std::string& reason, bool host_available, const At& at) {
  if (Ended(t.job.state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", t.job.id(), " has already ended"));
  }
  if (t.job.state() == pb::PENDING) return Finish(t, pb::EXIT, 130, reason.empty() ? "killed while pending" : reason, at);
  if (!host_available) return Finish(t, pb::EXIT, 130, reason.empty() ? "killed; its host is unavailable" : reason, at);
  if (!reason.empty()) t.killed_because = reason;
  t.asked = Asked::kKill;
  Effects fx;
  fx.signal = pb::SignalRequest::KILL;  // the job ends when its agent reports task 0's exit
  return fx;
}

absl::StatusOr<Effects> AskRequeue(Tracked& t) {
  if (t.job.state() != pb::RUNNING && t.job.state() != pb::SUSPENDED) {
    return NotAllowed(t.job, "; only running or suspended jobs can be requeued");
  }
  t.asked = Asked::kRequeue;
  Effects fx;
  fx.signal = pb::SignalRequest::KILL;
  return fx;
}

absl::StatusOr<Effects> Rerun(Tracked& t, const At& at) {
  pb::Job& job = t.job;
  if (job.state() == pb::PENDING) return NotAllowed(job, ": it has not run yet");
  if (!Ended(job.state())) return NotAllowed(job, "; a running job is requeued instead");
  job.add_history(absl::StrCat(at.Stamp(), " rerun by user after attempt ", job.attempt(), " ended ",
                               pb::JobState_Name(job.state()), " (exit code ", job.exit_code(), ")"));
  job.set_state(pb::PENDING);
  job.set_attempt(job.attempt() + 1);
  job.clear_tasks();
  job.clear_started_at();
  job.clear_ended_at();
  job.set_exit_code(0);
  job.set_reason("rerun by user");
  t.asked = Asked::kNothing;
  t.killed_because.clear();
  Effects fx;
  fx.write = true;
  return fx;
}

absl::StatusOr<Effects> AskSuspend(Tracked& t, const std::string& system_reason, const At& at) {
  pb::Job& job = t.job;
  if (system_reason.empty() && job.state() == pb::SUSPENDED && !job.system_suspend_reason().empty()) {
    // A user suspends what the system suspended: it stays stopped, now as the user's, and
    // no longer resumes when its window opens (LSF turns SSUSP into USUSP).
    job.clear_system_suspend_reason();
    job.set_reason("suspended by user");
    job.add_history(absl::StrCat(at.Stamp(), " suspended by user (was suspended by the system)"));
    Effects fx;
    fx.write = true;
    return fx;
  }
  if (job.state() != pb::RUNNING) return NotAllowed(job, ", not RUNNING");
  Effects fx;
  fx.signal = pb::SignalRequest::SUSPEND;  // then Suspended
  return fx;
}

Effects Suspended(Tracked& t, const std::string& system_reason, const At& at) {
  pb::Job& job = t.job;
  job.set_state(pb::SUSPENDED);
  for (pb::Task& task : *job.mutable_tasks()) {
    if (task.index() == 0 || (task.remote() && task.state() == pb::TASK_RUNNING)) task.set_state(pb::TASK_SUSPENDED);
  }
  if (!system_reason.empty()) {
    job.set_system_suspend_reason(system_reason);
    job.set_reason(absl::StrCat("suspended: ", system_reason));
    job.add_history(absl::StrCat(at.Stamp(), " suspended: ", system_reason));
  } else {
    job.set_reason("suspended by user");
  }
  Effects fx;
  fx.write = true;
  fx.scheduler = SchedulerStep::kSuspend;  // released resources (RESS release) go back while it is stopped
  fx.freed = true;
  return fx;
}

absl::Status AskResume(const Tracked& t, bool by_system) {
  const pb::Job& job = t.job;
  if (job.state() != pb::SUSPENDED) return NotAllowed(job, ", not SUSPENDED");
  if (!by_system && !job.system_suspend_reason().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.id(), " was suspended by the system (",
                                                      job.system_suspend_reason(),
                                                      "); it resumes by itself when that ends"));
  }
  if (by_system && job.system_suspend_reason().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.id(), " was suspended by a user"));
  }
  return absl::OkStatus();
}

Effects Resumed(Tracked& t, const At& at) {
  pb::Job& job = t.job;
  job.set_state(pb::RUNNING);
  for (pb::Task& task : *job.mutable_tasks()) {
    if (task.index() == 0 || (task.remote() && task.state() == pb::TASK_SUSPENDED)) task.set_state(pb::TASK_RUNNING);
  }
  if (!job.system_suspend_reason().empty()) {
    job.add_history(absl::StrCat(at.Stamp(), " resumed by the system (suspended because ",
                                 job.system_suspend_reason(), ")"));
  }
  job.clear_system_suspend_reason();
  job.clear_preempted_by();
  job.clear_reason();
  Effects fx;
  fx.write = true;
  fx.scheduler = SchedulerStep::kResume;
  return fx;
}

namespace {
int HeldSlots(const pb::Job& job) {
  int held = 0;
  for (const pb::Task& task : job.tasks()) held += Held(task) ? task.slots() : 0;
  return held;
}
}  // namespace

Effects Grew(Tracked& t, pb::Task allocation, const At& at) {
  pb::Job& job = t.job;
  const int held = HeldSlots(job);
  allocation.set_index(job.tasks_size());
  allocation.set_state(pb::TASK_RUNNING);
  allocation.set_grown(true);
  job.add_history(absl::StrCat(at.Stamp(), " grew by ", allocation.slots(), " slot(s) on ", allocation.host(),
                               " (elastic: ", held + allocation.slots(), " of at most ", job.spec().max_slots(), ")"));
  job.add_resize_events(absl::StrCat("grow ", allocation.host(), " ", allocation.slots()));
  *job.add_tasks() = std::move(allocation);
  Effects fx;
  fx.write = true;
  return fx;
}

absl::StatusOr<Effects> Shrunk(Tracked& t, const std::string& host, int slots, int64_t for_job, const At& at) {
  pb::Job& job = t.job;
  const int held = HeldSlots(job);
  // The scheduler gives back the newest growth first: the last allocation still held.
  pb::Task* given = nullptr;
  for (int i = job.tasks_size() - 1; i >= 0 && given == nullptr; --i) {
    pb::Task* task = job.mutable_tasks(i);
    if (task->grown() && Held(*task)) given = task;
  }
  if (given == nullptr || given->host() != host || given->slots() < slots) {
    return absl::InternalError(absl::StrCat("its newest growth is not ", slots, " slot(s) on ", host));
  }
  // All of it, or part of its slots (the waiting job left the rest free).
  if (given->slots() == slots) {
    given->set_state(pb::TASK_EXITED);
  } else {
    given->set_slots(given->slots() - slots);
  }
  job.add_history(absl::StrCat(at.Stamp(), " gave back ", slots, " slot(s) on ", host, " to job ", for_job,
                               " (elastic: ", held - slots, " left)"));
  job.add_resize_events(absl::StrCat("shrink ", host, " ", slots));
  Effects fx;
  fx.write = true;
  // Its remote tasks there end once the job holds nothing more on that host.
  const bool still_there =
      std::any_of(job.tasks().begin(), job.tasks().end(), [&](const pb::Task& a) { return Held(a) && a.host() == host; });
  if (!still_there) {
    for (const pb::Task& task : job.tasks()) {
      if (!task.remote() || task.host() != host || task.state() == pb::TASK_EXITED || task.state() == pb::TASK_LOST) {
        continue;
      }
      fx.kill_tasks.push_back(task.index());
    }
  }
  return fx;
}

Effects PreemptedForRequeue(Tracked& victim, int64_t preemptor, const std::string& reason, absl::Duration grace,
                            const At& at) {
  pb::Job& job = victim.job;
  job.set_preemptions(job.preemptions() + 1);
  victim.asked = Asked::kRequeue;
  victim.preempt_kill_at = at.now + grace;
  job.add_history(absl::StrCat(at.Stamp(), " ", reason, ": requeued (",
                               grace > absl::ZeroDuration()
                                   ? absl::StrCat("SIGTERM, then SIGKILL after ", absl::FormatDuration(grace))
                                   : "SIGKILL now: its queue gives no grace",
                               ")"));
  job.set_reason(reason);
  // Stored: a master restarted within the grace finishes the requeue.
  *job.mutable_requeue_at() = ToTimestamp(victim.preempt_kill_at);
  job.set_preempted_by(preemptor);
  Effects fx;
  fx.write = true;
  // SIGTERM to task 0's process group (the job's command and what it started there);
  // every task gets SIGKILL once the grace is over (AskRequeue).
  if (grace > absl::ZeroDuration()) {
    fx.term_first_task = true;
  } else {
    victim.preempt_kill_at = absl::InfiniteFuture();  // SIGKILL once
    fx.signal = pb::SignalRequest::KILL;
  }
  return fx;
}

Effects PreemptedForSuspend(Tracked& victim, int64_t preemptor) {
  victim.job.set_preemptions(victim.job.preemptions() + 1);
  victim.job.set_preempted_by(preemptor);
  Effects fx;
  fx.write = true;  // then AskSuspend with the preemption's reason
  return fx;
}

Effects PreemptionNotCarriedOut(Tracked& victim, int64_t preemptor, bool requeue, const std::string& message,
                                const At& at) {
  pb::Job& job = victim.job;
  if (Ended(job.state()) || job.state() == pb::PENDING) return {};
  // The victim keeps its resources and the preemptor tries again in a later cycle.
  if (requeue && victim.asked == Asked::kRequeue) {
    victim.asked = Asked::kNothing;
    job.clear_reason();  // it said the job was being requeued
  }
  victim.preempt_kill_at = absl::InfiniteFuture();
  job.clear_preempted_by();
  job.clear_requeue_at();
  job.add_history(absl::StrCat(at.Stamp(), " preemption for job ", preemptor, " not carried out: ", message));
  Effects fx;
  fx.write = true;
  fx.scheduler = SchedulerStep::kCancelPreemption;
  return fx;
}

}  // namespace jc::nexec::job_state
