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

}  // namespace
}  // namespace jc::nexec::job_state
