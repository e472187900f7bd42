// Job status from replica states under each status policy of standard 6.4 a–d, and the
// retry policy (SPEC A7).

#include <catch2/catch.hpp>

#include "common/timestamp.h"
#include "services/jobs/job_state.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {
namespace {

using R = v1::ReplicaRecord;

google::protobuf::RepeatedPtrField<R> States(std::initializer_list<R::State> states) {
  google::protobuf::RepeatedPtrField<R> out;
  for (auto s : states) out.Add()->set_state(s);
  return out;
}

std::string StatusOf(v1::StatusPolicy p, std::initializer_list<R::State> states) {
  return EvaluateJob(p, States(states)).status;
}

TEST_CASE("before an outcome: pending until a replica runs, then running [A7]", "[A7]") {
  CHECK(StatusOf(v1::ALL_SUCCEED, {R::WAITING, R::DISPATCHING, R::PENDING}) == kPending);
  CHECK(StatusOf(v1::ALL_SUCCEED, {R::RUNNING, R::WAITING}) == kRunning);
  CHECK(StatusOf(v1::ALL_SUCCEED, {R::SUCCEEDED, R::PENDING}) == kRunning);
}

TEST_CASE("a) all succeed: completed when every replica succeeded, failed at the first failure [A7]", "[A7]") {
  CHECK(StatusOf(v1::ALL_SUCCEED, {R::SUCCEEDED, R::SUCCEEDED}) == kCompleted);
  CHECK(StatusOf(v1::ALL_SUCCEED, {R::SUCCEEDED, R::RUNNING}) == kRunning);
  CHECK(StatusOf(v1::ALL_SUCCEED, {R::FAILED, R::RUNNING}) == kFailed);
}

TEST_CASE("b) any succeeds: completed at the first success, failed only when all failed [A7]", "[A7]") {
  CHECK(StatusOf(v1::ANY_SUCCEED, {R::SUCCEEDED, R::RUNNING}) == kCompleted);
  CHECK(StatusOf(v1::ANY_SUCCEED, {R::FAILED, R::RUNNING}) == kRunning);
  CHECK(StatusOf(v1::ANY_SUCCEED, {R::FAILED, R::STOPPED}) == kFailed);
}

TEST_CASE("c) all fail: failed only when every replica failed, else completed once all ended [A7]", "[A7]") {
  CHECK(StatusOf(v1::ALL_FAIL, {R::FAILED, R::FAILED}) == kFailed);
  CHECK(StatusOf(v1::ALL_FAIL, {R::FAILED, R::RUNNING}) == kRunning);
  auto mixed = EvaluateJob(v1::ALL_FAIL, States({R::FAILED, R::SUCCEEDED}));
  CHECK(mixed.status == kCompleted);
  CHECK(mixed.reason == "1 of 2 replicas succeeded (policy: all fail)");
}

TEST_CASE("d) any fails: failed at the first failure, completed when all succeeded [A7]", "[A7]") {
  CHECK(StatusOf(v1::ANY_FAIL, {R::FAILED, R::RUNNING}) == kFailed);
  CHECK(StatusOf(v1::ANY_FAIL, {R::SUCCEEDED, R::SUCCEEDED}) == kCompleted);
}

TEST_CASE("replica statuses as Appendix A names them [A7][A12]", "[A7][A12]") {
  CHECK(std::string(ReplicaStatus(R::WAITING)) == "pending");
  CHECK(std::string(ReplicaStatus(R::DISPATCHING)) == "pending");
  CHECK(std::string(ReplicaStatus(R::RUNNING)) == "running");
  CHECK(std::string(ReplicaStatus(R::SUCCEEDED)) == "completed");
  CHECK(std::string(ReplicaStatus(R::STOPPED)) == "failed");
}

TEST_CASE("the retry policy retries up to N times, remembering the centers that failed [A7]", "[A7]") {
  v1::RetryPolicy policy;
  policy.set_max_retries(2);
  R r;
  r.set_state(R::RUNNING);
  r.set_center_id("a");
  r.set_message("exited with 3");
  const absl::Time failed_at = absl::FromUnixSeconds(1'800'000'000);
  REQUIRE(RetryIfAllowed(policy, &r, failed_at));
  CHECK(r.state() == R::WAITING);
  CHECK(r.attempt() == 1);
  CHECK(jc::FromTimestamp(r.restart_after()) == failed_at);  // it waits from its retry
  CHECK(r.center_id().empty());
  CHECK(r.failed_centers(0) == "a");
  r.set_center_id("b");
  REQUIRE(RetryIfAllowed(policy, &r, failed_at));
  CHECK(r.attempt() == 2);
  CHECK(r.failed_centers_size() == 2);
  r.set_center_id("c");
  CHECK_FALSE(RetryIfAllowed(policy, &r, failed_at));  // N = 2 retries used
  CHECK(r.attempt() == 2);
  v1::RetryPolicy never;
  R once;
  CHECK_FALSE(RetryIfAllowed(never, &once, failed_at));
}

// Attacker's review, session 67 (helper-67): a retry waited from the job's submission (a
// 23-hour run counted as 23 hours of waiting: first in line, and overdue once the day was
// up), and a service's replica that had waited hours started its wait again each time a
// sibling restarted.
TEST_CASE("a job waits since its longest-waiting replica fell due: a retry from its retry, a replica never placed "
          "from the submission, whatever a sibling's restarts say [A7][A16][A17]",
          "[A7][A16][A17]") {
  const absl::Time received = absl::FromUnixSeconds(1'800'000'000);
  v1::JobRecord job;
  *job.mutable_received_at() = jc::ToTimestamp(received);
  auto* first = job.add_replicas();
  first->set_state(R::RUNNING);
  auto* second = job.add_replicas();
  second->set_state(R::RUNNING);
  v1::RetryPolicy policy;
  policy.set_max_retries(3);
  // The first fails after 23 hours and is retried: the job waits from then.
  REQUIRE(RetryIfAllowed(policy, first, received + absl::Hours(23)));
  CHECK(WaitingSince(job) == received + absl::Hours(23));
  // The second waits too, never placed since the submission (restart_after unset): the
  // job has waited since then.
  second->set_state(R::WAITING);
  CHECK(WaitingSince(job) == received);
  // A sibling restarting later (a back-off into the future) does not restart that wait.
  *first->mutable_restart_after() = jc::ToTimestamp(received + absl::Hours(30));
  CHECK(WaitingSince(job) == received);
  // Nothing waits: the submission.
  first->set_state(R::RUNNING);
  second->set_state(R::RUNNING);
  CHECK(WaitingSince(job) == received);
}

}  // namespace
}  // namespace jc::jobs
