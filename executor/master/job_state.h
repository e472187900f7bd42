#pragma once

// The nexec job state machine (issue 32 item 1): what becomes of a job when something
// happens to it — dispatched, its launch answered, a task reported, a host lost, a kill,
// requeue, rerun, suspension or resumption asked, a preemption decided or failed —
// decided without I/O, locks or the master's tables. Each transition changes the job it is
// given and answers the effects the master carries out: the scheduler's model (cancel,
// release, queue again, suspend, resume), the store write (always first: commit or stop),
// then the launch (through the per-agent outbox) and the signals to its tasks. Time comes
// in as an argument, so a sequence of events always gives the same states and effects:
// the golden files in tests/unit/executor/data/job_state/ (job_state_golden_test.cc) and
// the decision tables in job_state_test.cc. Elastic growth and shrinking too (Grew,
// Shrunk); master_elastic.cc only carries them out.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec::job_state {

// What a user (or the master) asked of a running job that has not taken effect yet.
enum class Asked { kNothing, kKill, kRequeue };

// The job as the master keeps it: its stored record and what is under way for it.
struct Tracked {
  ::nexec::v1::Job job;
  Asked asked = Asked::kNothing;
  bool launch_in_flight = false;  // a launch of the current attempt is under way
  bool seen_by_agent = false;     // the agent has reported the current attempt
  // The agent accepted the current attempt's launch; full heartbeats from its host since
  // that did not report it. An accepted attempt never reported is lost (NotReported).
  bool launch_accepted = false;
  int unreported_heartbeats = 0;
  std::string killed_because;     // why the master or an agent killed task 0 (run limit, GPU misuse, ...)
  // A preemption victim being requeued: SIGTERM was sent; SIGKILL at this time.
  absl::Time preempt_kill_at = absl::InfiniteFuture();
};

// When a transition happens, and the zone its history lines are written in.
struct At {
  absl::Time now;
  absl::TimeZone zone = absl::UTCTimeZone();
  std::string Stamp() const;
};

// What the scheduler's model must do for the job after a transition.
enum class SchedulerStep {
  kNone,
  kQueue,             // a new job joins its queue (QueueRefused() says when it was refused)
  kCancel,            // a pending job leaves the queue
  kRelease,           // a placed job's resources go back
  kRequeue,           // released, then queued again (Requeued() says when it was refused)
  kSuspend,           // what a suspension releases goes back
  kResume,
  kCancelPreemption,  // the victim keeps its resources
};

// Effects of a transition, carried out by the master in this order: the scheduler's model
// (under the lock), the store write, then the launch and the signals.
struct Effects {
  bool write = false;  // the record changed: commit it before anything below
  SchedulerStep scheduler = SchedulerStep::kNone;
  bool launch = false;  // the attempt's launch to task 0's agent
  std::optional<::nexec::v1::SignalRequest::Action> signal;  // to every task with a process
  bool term_first_task = false;                              // SIGTERM to task 0 (a preemption's grace)
  bool freed = false;                                        // resources came free: run a cycle
  bool kill_report = false;                                  // the reported task must end (a stray)
  double cpu_seconds = 0;  // CPU time the job's tasks used since their last report (fair share)
  // Resize events task 0's event file misses, for the heartbeat's answer (elastic jobs).
  std::optional<::nexec::v1::SignalRequest> notify;
  // Elastic: remote tasks (by index) to end, on a host the job no longer holds anything of.
  std::vector<int> kill_tasks;
};

// ---- decisions (pure functions of facts) ----

// The job's first task ended (its agent reported the exit).
struct FirstTaskEnded {
  int exit_code = 0;
  bool pre_exec_failed = false;  // the pre-exec command failed: the task never ran
  std::string message;           // the agent's words (the pre-exec's exit, its timeout)
  Asked asked = Asked::kNothing;
  std::string killed_because;    // why the master killed it (run limit, GPU misuse, ...), if it did
  std::string preempted;         // a requeue the master asked for a preemption: its reason
  int pre_exec_failures = 0;     // this attempt's included
  int pre_exec_retries = 3;      // the queue's
};

// Requeue: the job waits again for a host (its attempt ends); finish: it ends for good.
struct Outcome {
  enum class Kind { kRequeue, kFinish };
  Kind kind = Kind::kFinish;
  ::nexec::v1::JobState state = ::nexec::v1::EXIT;  // kFinish: DONE or EXIT
  int exit_code = 0;
  std::string reason;  // the history line's and the job's reason

  bool operator==(const Outcome&) const = default;
};

Outcome AfterFirstTaskEnded(const FirstTaskEnded& e);

// A host the job runs on was lost: it stopped heartbeating (`where` = "host node1 failed"),
// or its agent no longer knows the task it reported before (`where` = "task lost on node1").
Outcome AfterHostLost(bool rerun_on_host_failure, const std::string& where);

// DONE or EXIT: the job will not run again unless asked (rerun).
inline bool Ended(::nexec::v1::JobState s) { return s == ::nexec::v1::DONE || s == ::nexec::v1::EXIT; }

// ---- transitions ----

// The job ends (DONE or EXIT) or goes back to its queue for another attempt.
Effects Finish(Tracked& t, ::nexec::v1::JobState state, int exit_code, const std::string& reason, const At& at);
Effects Requeue(Tracked& t, const std::string& reason, const At& at);
Effects Apply(Tracked& t, const Outcome& outcome, const At& at);
// The scheduler refused to queue a requeued job again: it ends.
void RequeueRefused(Tracked& t, const std::string& why);

// A submission accepted as job `id` (its request already checked against the cluster):
// the job waits in its queue, written before the submitter hears of it.
Effects Submitted(Tracked& t, int64_t id, ::nexec::v1::JobSpec spec, const At& at);
// The scheduler refused to queue the new job (the cluster changed since the check: a host
// left): it ends, kept with the reason rather than dropped.
void QueueRefused(Tracked& t, const std::string& why);

// The scheduler placed the job: `tasks` are its allocations in order (task 0 first).
// `backfilled_before` names the job whose reservation it runs ahead of (0: none).
Effects Dispatch(Tracked& t, std::vector<::nexec::v1::Task> tasks, int64_t backfilled_before,
                 absl::Duration run_limit, const At& at);
// Task 0's agent answered the launch of `attempt`: its pid, or why it did not start.
Effects LaunchAnswered(Tracked& t, int attempt, const absl::StatusOr<int>& pid, const At& at);
// A task of the current attempt reported by `host`'s agent. `pre_exec_retries` is the
// job's queue's.
Effects TaskReported(Tracked& t, const ::nexec::v1::TaskReport& r, const std::string& host, int pre_exec_retries,
                     const At& at);
// The agent of task 0's host heartbeat without reporting the running job: launched again
// when that agent never reported it (an agent runs an attempt at most once), lost when it did.
// Full heartbeats from the host, after its agent accepted a launch, that may leave it out
// before the attempt counts as lost: one heartbeat may have been built before the launch
// arrived; two cannot.
inline constexpr int kLostAfterHeartbeats = 2;
Effects NotReported(Tracked& t, bool rerun_on_host_failure, const std::string& host, const At& at);
// Task 0 of the current attempt was ended by its agent's restart (the successor killed what
// its predecessor left: TaskReport.ended_by_agent_restart), not by itself: the host's rules
// apply (rerun or fail), as for a task lost with its host. Another report is TaskReported's.
Effects EndedByAgentRestart(Tracked& t, const ::nexec::v1::TaskReport& r, bool rerun_on_host_failure,
                            const std::string& host, int pre_exec_retries, const At& at);
Effects HostLost(Tracked& t, bool rerun_on_host_failure, const std::string& where, const At& at);

// A user's (or the master's) requests. An error says why it cannot be done and changes nothing.
absl::StatusOr<Effects> AskKill(Tracked& t, const std::string& reason, bool host_available, const At& at);
absl::StatusOr<Effects> AskRequeue(Tracked& t);
// A job that ended runs again as a new attempt (the scheduler took its request first).
absl::StatusOr<Effects> Rerun(Tracked& t, const At& at);
// Suspension: by a user (`system_reason` empty) or the system. The job is SUSPENDED once its
// tasks were signalled (Suspended); a user suspending what the system suspended takes it
// over at once.
absl::StatusOr<Effects> AskSuspend(Tracked& t, const std::string& system_reason, const At& at);
Effects Suspended(Tracked& t, const std::string& system_reason, const At& at);
absl::Status AskResume(const Tracked& t, bool by_system);
Effects Resumed(Tracked& t, const At& at);

// Elastic jobs (SPEC B4): a cycle grew the job by `allocation` (a task entry for a host and
// its slots), or it gives back `slots` on `host` to job `for_job` — its newest growth first
// (an error, changing nothing, when that is not what it holds). Either adds the history line
// and the resize event its task 0 is told of through its event file.
Effects Grew(Tracked& t, ::nexec::v1::Task allocation, const At& at);
absl::StatusOr<Effects> Shrunk(Tracked& t, const std::string& host, int slots, int64_t for_job, const At& at);

// Preemption: the victim is suspended (AskSuspend with the reason) or requeued: SIGTERM now,
// SIGKILL (AskRequeue) once the queue's grace is over.
Effects PreemptedForRequeue(Tracked& victim, int64_t preemptor, const std::string& reason, absl::Duration grace,
                            const At& at);
Effects PreemptedForSuspend(Tracked& victim, int64_t preemptor);
Effects PreemptionNotCarriedOut(Tracked& victim, int64_t preemptor, bool requeue, const std::string& message,
                                const At& at);

}  // namespace jc::nexec::job_state
