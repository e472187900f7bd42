// What becomes of a nexec job when its first task ends or its host is lost
// (executor/master/job_state.h): decided without I/O, table by table.
#include "executor/master/job_state.h"

#include <catch2/catch.hpp>

namespace jc::nexec::job_state {
namespace {

namespace pb = ::nexec::v1;
using Kind = Outcome::Kind;

struct Row {
  const char* what;
  FirstTaskEnded event;
  Outcome want;
};

FirstTaskEnded Ended(int code, Asked asked = Asked::kNothing, std::string killed_because = "") {
  FirstTaskEnded e;
  e.exit_code = code;
  e.asked = asked;
  e.killed_because = std::move(killed_because);
  return e;
}

FirstTaskEnded Preempted(std::string reason) {
  FirstTaskEnded e = Ended(137, Asked::kRequeue);
  e.preempted = std::move(reason);
  return e;
}

FirstTaskEnded PreExecFailed(int failures, int retries, Asked asked = Asked::kNothing) {
  FirstTaskEnded e;
  e.exit_code = 1;
  e.pre_exec_failed = true;
  e.message = "pre-exec exited 1";
  e.pre_exec_failures = failures;
  e.pre_exec_retries = retries;
  e.asked = asked;
  return e;
}

TEST_CASE("a job's first task ending decides the job: done, exited, killed, requeued, or retried after its "
          "pre-exec failed [B1][B11]") {
  const std::vector<Row> rows = {
      {"exit 0", Ended(0), {Kind::kFinish, pb::DONE, 0, ""}},
      {"exit 3", Ended(3), {Kind::kFinish, pb::EXIT, 3, "exited with 3"}},
      {"killed by the master (run limit)", Ended(137, Asked::kNothing, "run limit 1m reached"),
       {Kind::kFinish, pb::EXIT, 137, "run limit 1m reached"}},
      {"killed by its user", Ended(137, Asked::kKill), {Kind::kFinish, pb::EXIT, 137, "killed by user"}},
      {"killed by its user, although it exited 0 meanwhile", Ended(0, Asked::kKill),
       {Kind::kFinish, pb::EXIT, 0, "killed by user"}},
      {"killed with a reason", Ended(137, Asked::kKill, "GPU misuse"), {Kind::kFinish, pb::EXIT, 137, "GPU misuse"}},
      {"requeued by its user", Ended(137, Asked::kRequeue), {Kind::kRequeue, pb::PENDING, 0, "requeued by user"}},
      {"requeued for a preemption: says so, not 'by user'", Preempted("preempted by job 9 (queue high)"),
       {Kind::kRequeue, pb::PENDING, 0, "preempted by job 9 (queue high); requeued"}},
      {"pre-exec failed, retries left", PreExecFailed(1, 3),
       {Kind::kRequeue, pb::PENDING, 0, "pre-exec exited 1; requeued"}},
      {"pre-exec failed the last allowed time", PreExecFailed(3, 3),
       {Kind::kRequeue, pb::PENDING, 0, "pre-exec exited 1; requeued"}},
      {"pre-exec failed once too often", PreExecFailed(4, 3),
       {Kind::kFinish, pb::EXIT, 1, "pre-exec exited 1; ended after 3 requeue(s)"}},
      {"pre-exec failed, no retries", PreExecFailed(1, 0),
       {Kind::kFinish, pb::EXIT, 1, "pre-exec exited 1; ended after 0 requeue(s)"}},
      {"pre-exec failed while its user killed it: the kill wins", PreExecFailed(1, 3, Asked::kKill),
       {Kind::kFinish, pb::EXIT, 1, "killed by user"}},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    Outcome got = AfterFirstTaskEnded(row.event);
    CHECK(got.kind == row.want.kind);
    CHECK(got.state == row.want.state);
    CHECK(got.exit_code == row.want.exit_code);
    CHECK(got.reason == row.want.reason);
  }
}

TEST_CASE("a job whose host is lost reruns where its queue says so, and otherwise ends as if SIGKILLed [B1][C7]") {
  CHECK(AfterHostLost(true, "host node1 failed") == Outcome{Kind::kRequeue, pb::PENDING, 0, "host node1 failed; rerun"});
  CHECK(AfterHostLost(false, "task lost on node2") == Outcome{Kind::kFinish, pb::EXIT, 137, "task lost on node2"});
}

// A job dispatched to node1 at attempt 0, its launch under way.
Tracked Dispatched() {
  Tracked t;
  t.job.set_id(7);
  pb::Task task;
  task.set_host("node1");
  task.set_slots(1);
  Dispatch(t, {task}, 0, absl::ZeroDuration(), At{absl::UnixEpoch()});
  return t;
}

TEST_CASE("a launch the agent accepted but never reports is lost after two full heartbeats and requeued as a new "
          "attempt, where one unanswered is sent again [B6][C7]") {
  const At at{absl::UnixEpoch() + absl::Seconds(5)};
  {
    // Answered: accepted (an agent that had run job 7's attempt 0 for a store restored
    // since answers from its memory, pid 0, and never reports it).
    Tracked t = Dispatched();
    CHECK(LaunchAnswered(t, 0, 0, at).scheduler == SchedulerStep::kNone);
    CHECK(t.job.state() == pb::RUNNING);
    // One heartbeat may have been built before the launch arrived: nothing yet.
    Effects first = NotReported(t, true, "node1", at);
    CHECK_FALSE(first.launch);
    CHECK(first.scheduler == SchedulerStep::kNone);
    CHECK(t.job.state() == pb::RUNNING);
    // The second: lost, back to the queue as attempt 1 (a key the agent never saw).
    Effects second = NotReported(t, false, "node1", at);  // whatever the queue's rerun rule
    CHECK(second.scheduler == SchedulerStep::kRequeue);
    CHECK(second.write);
    CHECK(t.job.state() == pb::PENDING);
    CHECK(t.job.attempt() == 1);
    CHECK(t.job.reason().find("lost: node1 accepted the launch of attempt 0 but never reported it") == 0);
    REQUIRE(t.job.history_size() > 0);
    CHECK(t.job.history(t.job.history_size() - 1).find("lost: node1") != std::string::npos);
  }
  {
    // Reported, then left out: the agent lost it (it restarted), which the host's rule
    // decides, not the lost launch's.
    Tracked t = Dispatched();
    LaunchAnswered(t, 0, 1234, at);
    pb::TaskReport r;
    r.set_job_id(7);
    r.set_attempt(0);
    r.set_state(pb::TASK_RUNNING);
    r.set_pid(1234);
    TaskReported(t, r, "node1", 3, at);
    NotReported(t, false, "node1", at);
    CHECK(t.job.state() == pb::EXIT);
    CHECK(t.job.reason() == "task lost on node1");
  }
  {
    // Unanswered (the call failed): the same attempt is sent again, not requeued.
    Tracked t = Dispatched();
    LaunchAnswered(t, 0, absl::UnavailableError("connection reset"), at);
    Effects again = NotReported(t, true, "node1", at);
    CHECK(again.launch);
    CHECK(t.job.attempt() == 0);
  }
  {
    // Unanswered, then killed (its agent answered the kill that it does not run the task):
    // the next heartbeat without it ends the job, killed; it is not sent again.
    Tracked t = Dispatched();
    LaunchAnswered(t, 0, absl::UnavailableError("connection reset"), at);
    REQUIRE(AskKill(t, "", /*host_available=*/true, at).ok());
    Effects ended = NotReported(t, true, "node1", at);
    CHECK_FALSE(ended.launch);
    CHECK(t.job.state() == pb::EXIT);
    CHECK(t.job.exit_code() == 130);
    CHECK(t.job.reason() == "killed before node1 started it");
  }
}

TEST_CASE("a launch an agent refuses because it serves another master's store goes back to the queue as a new "
          "attempt, saying so [B6][C7]") {
  Tracked t = Dispatched();
  Effects fx = LaunchAnswered(t, 0, absl::AbortedError("the agent on node1 serves the master of store aaaa"),
                              At{absl::UnixEpoch()});
  CHECK(fx.scheduler == SchedulerStep::kRequeue);
  CHECK(t.job.state() == pb::PENDING);
  CHECK(t.job.attempt() == 1);
  CHECK(t.job.reason().find("node1 refused the launch of attempt 0: the agent on node1 serves the master of store "
                            "aaaa") == 0);
}

TEST_CASE("a task its agent's restart ended is a host failure, not the task's: rerun where the queue says so, "
          "failed saying why otherwise, and a task that ended by itself keeps its exit code (issue 47) [B6][C7]") {
  const At at{absl::UnixEpoch()};
  pb::TaskReport r;
  r.set_job_id(7);
  r.set_attempt(0);
  r.set_state(pb::TASK_EXITED);
  r.set_exit_code(137);
  r.set_ended_by_agent_restart(true);
  {
    Tracked t = Dispatched();
    LaunchAnswered(t, 0, 1234, at);
    Effects fx = EndedByAgentRestart(t, r, /*rerun_on_host_failure=*/true, "node2", 3, at);
    CHECK(fx.scheduler == SchedulerStep::kRequeue);
    CHECK(t.job.state() == pb::PENDING);
    CHECK(t.job.attempt() == 1);
    CHECK(t.job.reason() == "task ended by the restart of its agent on node2; rerun");
  }
  {
    Tracked t = Dispatched();
    LaunchAnswered(t, 0, 1234, at);
    EndedByAgentRestart(t, r, /*rerun_on_host_failure=*/false, "node2", 3, at);
    CHECK(t.job.state() == pb::EXIT);
    CHECK(t.job.reason() == "task ended by the restart of its agent on node2");
  }
  {
    // Its exit journaled before the agent died: reported as it ended, by itself.
    Tracked t = Dispatched();
    LaunchAnswered(t, 0, 1234, at);
    pb::TaskReport done = r;
    done.set_exit_code(0);
    done.set_ended_by_agent_restart(false);
    EndedByAgentRestart(t, done, true, "node2", 3, at);
    CHECK(t.job.state() == pb::DONE);
    CHECK(t.job.attempt() == 0);
  }
}

}  // namespace
}  // namespace jc::nexec::job_state
