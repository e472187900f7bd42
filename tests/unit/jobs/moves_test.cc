// Moves in the job state machine (SPEC A16, issue 45 Deliver 4): a replica waiting at a
// center is asked back, and only a center's "withdrawn" for an attempt that was asked
// places it again — as a new attempt (a new replica key), never a retry, a gang whole.

#include <catch2/catch.hpp>

#include "common/timestamp.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/job_events.h"
#include "services/jobs/job_state.h"
#include "services/scheduler/placement_request.h"
#include "tests/unit/jobs/pending_job.h"

namespace {

namespace v1 = ::jointcloud::v1;
namespace apb = ::jointcloud::adapter::v1;
using jc::jobs::JobEffects;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// A job of `replicas` replicas of one task, each acknowledged as pending at `center` at kT0.
v1::JobRecord PendingJob(int replicas, const std::string& center, bool gang = false, int max_retries = 0) {
  return jc::jobs::testing::PendingJob(replicas, center, {.gang = gang, .max_retries = max_retries, .at = kT0});
}

apb::Replica Report(int replica, int attempt, apb::ReplicaState state, bool withdrawn) {
  apb::Replica r;
  r.mutable_key()->set_replica_index(replica);
  r.mutable_key()->set_attempt(attempt);
  r.set_state(state);
  r.set_withdrawn(withdrawn);
  return r;
}

// As the job manager applies a center's report: the attempt's history, then the replica.
JobEffects Apply(v1::JobRecord& job, int index, const std::string& center, const apb::Replica& report,
                 absl::Time now) {
  JobEffects fx;
  jc::jobs::ApplyAttemptReport(job, index, center, report, now, &fx);
  if (job.replicas(index).center_id() == center) jc::jobs::ApplyReport(job, index, report, now, &fx);
  return fx;
}

TEST_CASE("a replica withdrawn as asked waits to be placed again as a new attempt: no usage, no retry used, its "
          "old center avoided, and a \"withdrawn\" that says it started is a stop of a replica that ran [A16]",
          "[A16]") {
  v1::JobRecord job = PendingJob(1, "slow");
  REQUIRE(job.replicas(0).state() == v1::ReplicaRecord::PENDING);
  JobEffects asked;
  REQUIRE(jc::jobs::AskWithdraw(job, 0, "waited 5m at slow", kT0 + absl::Minutes(5), &asked));
  CHECK(asked.changed);
  CHECK(job.replicas(0).attempts(0).has_withdraw_asked_at());
  CHECK(job.replicas(0).state() == v1::ReplicaRecord::PENDING);  // nothing moves before the center's word
  // Asked once: a second ask changes nothing.
  JobEffects again;
  CHECK_FALSE(jc::jobs::AskWithdraw(job, 0, "again", kT0 + absl::Minutes(6), &again));

  // The center took it back (as the SDK reports it: no start, no usage).
  apb::Replica withdrawn = Report(0, 0, apb::REPLICA_STOPPED, true);
  JobEffects fx = Apply(job, 0, "slow", withdrawn, kT0 + absl::Minutes(6));
  const auto& rep = job.replicas(0);
  CHECK(rep.state() == v1::ReplicaRecord::WAITING);
  CHECK(rep.attempt() == 1);  // a new attempt: a new replica key
  CHECK(rep.moves() == 1);
  CHECK(rep.center_id().empty());
  REQUIRE(rep.moved_from_size() == 1);
  CHECK(rep.moved_from(0) == "slow");
  CHECK(rep.failed_centers_size() == 0);
  CHECK(rep.message() == "moved from slow: waited 5m at slow");
  CHECK(fx.wait);
  CHECK(fx.metered.empty());
  REQUIRE(rep.attempts_size() == 1);
  CHECK(rep.attempts(0).outcome() == "withdrawn");
  CHECK(rep.attempts(0).closed());
  CHECK_FALSE(rep.attempts(0).metered());
  CHECK_FALSE(rep.attempts(0).has_started_at());
  CHECK(job.status() == "pending");
  // A "withdrawn" that says it started contradicts itself: taken at its word that it ran.
  {
    v1::JobRecord other = PendingJob(1, "slow");
    JobEffects ask;
    REQUIRE(jc::jobs::AskWithdraw(other, 0, "moving", kT0, &ask));
    apb::Replica ran = Report(0, 0, apb::REPLICA_STOPPED, true);
    *ran.mutable_started_at() = jc::ToTimestamp(kT0 + absl::Seconds(30));
    ran.mutable_usage()->set_wall_seconds(100);
    JobEffects stopped = Apply(other, 0, "slow", ran, kT0 + absl::Minutes(2));
    CHECK(other.replicas(0).moves() == 0);
    CHECK(other.replicas(0).attempts(0).outcome() == "stopped");
    CHECK(stopped.metered.size() == 1);
  }
  // A repeated report of the old attempt changes nothing.
  JobEffects repeat = Apply(job, 0, "slow", withdrawn, kT0 + absl::Minutes(7));
  CHECK(job.replicas(0).attempt() == 1);
  CHECK(job.replicas(0).moves() == 1);
}

TEST_CASE("a move uses no retry: a job without retries moved once still has its one failure to fail on [A16][A7]",
          "[A16][A7]") {
  v1::JobRecord job = PendingJob(1, "slow", false, /*max_retries=*/1);
  JobEffects asked;
  REQUIRE(jc::jobs::AskWithdraw(job, 0, "moving", kT0, &asked));
  Apply(job, 0, "slow", Report(0, 0, apb::REPLICA_STOPPED, true), kT0);
  REQUIRE(job.replicas(0).attempt() == 1);
  // Placed at fast; it fails once: its one retry is still there.
  auto* rep = job.mutable_replicas(0);
  rep->set_center_id("fast");
  rep->set_state(v1::ReplicaRecord::DISPATCHING);
  jc::jobs::NotePlaced(job, 0, kT0);
  Apply(job, 0, "fast", Report(0, 1, apb::REPLICA_FAILED, false), kT0 + absl::Seconds(1));
  CHECK(job.replicas(0).state() == v1::ReplicaRecord::WAITING);
  CHECK(job.replicas(0).attempt() == 2);
  CHECK(job.replicas(0).message().rfind("retrying (attempt 2 of 2)", 0) == 0);
}

TEST_CASE("a center's \"withdrawn\" for an attempt never asked is a plain stop, and a withdrawal answered \"started\" "
          "leaves the replica running where it is [A16][C6]",
          "[A16][C6]") {
  SECTION("unasked") {
    v1::JobRecord job = PendingJob(1, "rogue");
    Apply(job, 0, "rogue", Report(0, 0, apb::REPLICA_STOPPED, true), kT0);
    CHECK(job.replicas(0).moves() == 0);
    CHECK(job.replicas(0).state() == v1::ReplicaRecord::FAILED);  // no retries: the stop fails it
    CHECK(job.replicas(0).attempts(0).outcome() == "stopped");
    CHECK(job.status() == "failed");
  }
  SECTION("started before the withdrawal reached the center") {
    v1::JobRecord job = PendingJob(1, "slow");
    JobEffects asked;
    REQUIRE(jc::jobs::AskWithdraw(job, 0, "moving", kT0, &asked));
    apb::Replica running = Report(0, 0, apb::REPLICA_RUNNING, false);
    *running.mutable_started_at() = jc::ToTimestamp(kT0 + absl::Seconds(1));
    JobEffects fx = Apply(job, 0, "slow", running, kT0 + absl::Seconds(2));
    CHECK(job.replicas(0).state() == v1::ReplicaRecord::RUNNING);
    CHECK(job.replicas(0).attempt() == 0);
    CHECK(job.replicas(0).center_id() == "slow");
    CHECK_FALSE(fx.wait);
    CHECK(fx.stop.empty());
    // Running, it is never asked again.
    JobEffects later;
    CHECK_FALSE(jc::jobs::AskWithdraw(job, 0, "again", kT0 + absl::Minutes(1), &later));
  }
}

TEST_CASE("a start seen is never erased by a later \"withdrawn\": the replica ran, and is billed and not placed "
          "again [A16][C6]",
          "[A16][C6]") {
  v1::JobRecord job = PendingJob(1, "rogue");
  JobEffects asked;
  REQUIRE(jc::jobs::AskWithdraw(job, 0, "moving", kT0, &asked));
  apb::Replica running = Report(0, 0, apb::REPLICA_RUNNING, false);
  *running.mutable_started_at() = jc::ToTimestamp(kT0 + absl::Seconds(1));
  Apply(job, 0, "rogue", running, kT0 + absl::Seconds(2));
  REQUIRE(job.replicas(0).state() == v1::ReplicaRecord::RUNNING);
  // An hour later the center says it was withdrawn, with an hour of usage.
  apb::Replica lie = Report(0, 0, apb::REPLICA_STOPPED, true);
  lie.mutable_usage()->set_wall_seconds(3600);
  JobEffects fx = Apply(job, 0, "rogue", lie, kT0 + absl::Hours(1));
  CHECK(job.replicas(0).moves() == 0);
  CHECK(job.replicas(0).attempt() == 0);
  CHECK(job.replicas(0).state() == v1::ReplicaRecord::FAILED);  // a stop, as the retry policy says
  CHECK(job.replicas(0).attempts(0).outcome() == "stopped");
  CHECK(job.replicas(0).attempts(0).has_started_at());
  CHECK(fx.metered.size() == 1);  // the hour it ran is billed
}

TEST_CASE("a withdrawal whose answer was lost still moves the replica: asked back and ended without a start is "
          "withdrawn, not a failure [A16][C7]",
          "[A16][C7]") {
  v1::JobRecord job = PendingJob(1, "slow", false, /*max_retries=*/0);
  JobEffects asked;
  REQUIRE(jc::jobs::AskWithdraw(job, 0, "moving", kT0, &asked));
  // The center's poller reports nexec's kill before the answer to the ask ever arrives.
  apb::Replica killed = Report(0, 0, apb::REPLICA_FAILED, false);
  killed.set_exit_code(130);
  killed.set_message("killed while pending");
  Apply(job, 0, "slow", killed, kT0 + absl::Seconds(1));
  CHECK(job.replicas(0).state() == v1::ReplicaRecord::WAITING);
  CHECK(job.replicas(0).moves() == 1);
  CHECK(job.replicas(0).attempt() == 1);
  CHECK(job.replicas(0).attempts(0).outcome() == "withdrawn");
  CHECK(job.status() == "pending");
}

TEST_CASE("a gang moves whole: one replica withdrawn places every replica of it again [A16][A8]", "[A16][A8]") {
  v1::JobRecord job = PendingJob(3, "slow", /*gang=*/true);
  for (int i = 0; i < 3; ++i) {
    JobEffects asked;
    REQUIRE(jc::jobs::AskWithdraw(job, i, "moving the gang", kT0, &asked));
  }
  JobEffects fx = Apply(job, 1, "slow", Report(1, 0, apb::REPLICA_STOPPED, true), kT0 + absl::Seconds(1));
  for (int i = 0; i < 3; ++i) {
    INFO("replica " << i);
    CHECK(job.replicas(i).state() == v1::ReplicaRecord::WAITING);
    CHECK(job.replicas(i).attempt() == 1);
    CHECK(job.replicas(i).moves() == 1);
  }
  // The others' attempts are stopped where they were (the center withdrew them with it).
  CHECK(fx.stop.size() == 2);
  // Their own "withdrawn" reports come later and change nothing more.
  Apply(job, 0, "slow", Report(0, 0, apb::REPLICA_STOPPED, true), kT0 + absl::Seconds(2));
  CHECK(job.replicas(0).attempt() == 1);
  CHECK(job.replicas(0).state() == v1::ReplicaRecord::WAITING);
}

}  // namespace

namespace {

// As the job manager places a waiting replica: a center, dispatching, the placement noted.
void Place(v1::JobRecord& job, int index, const std::string& center, absl::Time now) {
  job.mutable_replicas(index)->set_center_id(center);
  job.mutable_replicas(index)->set_state(v1::ReplicaRecord::DISPATCHING);
  jc::jobs::NotePlaced(job, index, now);
}

}  // namespace

TEST_CASE("a withdrawn replica placed again is a MOVED event of its own: from, to, which replica, why, beside the "
          "job's UPDATED, once, and never for a placement after a failure [A16][C8]",
          "[A16][C8]") {
  using jc::jobs::MovedEventsOf;
  const absl::Time t = kT0 + absl::Minutes(3);
  const v1::JobRecord pending = PendingJob(2, "slow", /*gang=*/false, /*max_retries=*/1);
  v1::JobRecord job = pending;
  JobEffects fx;
  REQUIRE(jc::jobs::AskWithdraw(job, 1, "waited 3m at slow; fast starts it now: moving it to fast", t, &fx));
  Apply(job, 1, "slow", Report(1, 0, apb::REPLICA_STOPPED, true), t);
  REQUIRE(job.replicas(1).state() == v1::ReplicaRecord::WAITING);
  CHECK(MovedEventsOf(&pending, job, t).empty());  // withdrawn, not placed yet
  const v1::JobRecord waiting = job;
  Place(job, 1, "fast", t);

  auto moved = MovedEventsOf(&waiting, job, t);
  REQUIRE(moved.size() == 1);
  const v1::TrainJobEvent& e = moved[0];
  CHECK(e.type() == v1::TrainJobEvent::MOVED);
  CHECK(e.job_id() == "job-1");
  CHECK(e.move().task_index() == 0);
  CHECK(e.move().replica_index() == 1);
  CHECK(e.move().from_center_id() == "slow");
  CHECK(e.move().to_center_id() == "fast");
  CHECK(e.move().attempt() == 1);
  CHECK(e.move().reason() == "waited 3m at slow; fast starts it now: moving it to fast");
  REQUIRE(e.replicas_size() == 1);
  CHECK(e.replicas(0).center_id() == "fast");
  CHECK(e.at() == jc::ToTimestamp(t));
  // The job's own event says the placement as before.
  auto updated = jc::jobs::EventOf(&waiting, job, t);
  REQUIRE(updated.has_value());
  CHECK(updated->type() == v1::TrainJobEvent::UPDATED);
  // Withdrawn and placed in one burst: the same one event.
  CHECK(MovedEventsOf(&pending, job, t).size() == 1);
  // Once: what happens to it at its new center later is no move.
  v1::JobRecord later = job;
  apb::Replica accepted;
  accepted.mutable_key()->set_replica_index(1);
  accepted.mutable_key()->set_attempt(1);
  accepted.set_state(apb::REPLICA_PENDING);
  jc::jobs::ApplySubmitAccepted(later, 1, accepted, t, &fx);
  CHECK(MovedEventsOf(&job, later, t).empty());
  // Failing to start at fast and placed elsewhere is a retry, not a move.
  v1::JobRecord retried = later;
  jc::jobs::ApplyAttemptFailedToStart(retried, 1, "no image", t, &fx);
  REQUIRE(retried.replicas(1).state() == v1::ReplicaRecord::WAITING);
  const v1::JobRecord retry_waiting = retried;
  Place(retried, 1, "other", t);
  CHECK(MovedEventsOf(&retry_waiting, retried, t).empty());
  CHECK(MovedEventsOf(nullptr, job, t).empty());  // a new job
}

TEST_CASE("a gang moved whole is one MOVED event per replica [A16][A8][C8]", "[A16][A8][C8]") {
  const absl::Time t = kT0 + absl::Minutes(3);
  v1::JobRecord job = PendingJob(2, "slow", /*gang=*/true);
  JobEffects fx;
  for (int i = 0; i < 2; ++i) REQUIRE(jc::jobs::AskWithdraw(job, i, "fast starts it now: moving it to fast", t, &fx));
  Apply(job, 0, "slow", Report(0, 0, apb::REPLICA_STOPPED, true), t);
  const v1::JobRecord waiting = job;
  Place(job, 0, "fast", t);
  Place(job, 1, "fast", t);
  auto moved = jc::jobs::MovedEventsOf(&waiting, job, t);
  REQUIRE(moved.size() == 2);
  CHECK(moved[0].move().replica_index() == 0);
  CHECK(moved[1].move().replica_index() == 1);
  for (const auto& e : moved) {
    CHECK(e.move().from_center_id() == "slow");
    CHECK(e.move().to_center_id() == "fast");
  }
}

namespace {

TEST_CASE("a center that refused a replica is held refused for it for kRefusalHold after its latest refusal, then is "
          "a failed center like another [A7][A16]",
          "[A7][A16]") {
  v1::JobRecord job = PendingJob(1, "slow", /*gang=*/false);
  job.mutable_request()->mutable_retry_policy()->set_max_retries(5);
  JobEffects fx;
  // A replica that ran and failed at a center is no refusal.
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), kT0).empty());
  job.mutable_replicas(0)->set_state(v1::ReplicaRecord::DISPATCHING);  // its submit is answered: refused
  jc::jobs::ApplyAttemptFailedToStart(job, 0, "unknown resource spec", kT0, &fx);
  REQUIRE(job.replicas(0).state() == v1::ReplicaRecord::WAITING);
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), kT0) == std::vector<std::string>{"slow"});
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), kT0 + jc::scheduler::kRefusalHold - absl::Seconds(1)) ==
        std::vector<std::string>{"slow"});
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), kT0 + jc::scheduler::kRefusalHold).empty());
  // Still a failed center: a retry prefers any other.
  CHECK(job.replicas(0).failed_centers(0) == "slow");
  // Refused elsewhere, later: that center is held; the first one's hold is not renewed by it.
  job.mutable_replicas(0)->set_state(v1::ReplicaRecord::DISPATCHING);
  job.mutable_replicas(0)->set_center_id("fast");
  const absl::Time later = kT0 + absl::Minutes(30);
  jc::jobs::ApplyAttemptFailedToStart(job, 0, "staging failed", later, &fx);
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), later + absl::Minutes(1)) == std::vector<std::string>{"fast"});
  // The first one refusing again holds it again, from its new refusal; the other keeps its own.
  job.mutable_replicas(0)->set_state(v1::ReplicaRecord::DISPATCHING);
  job.mutable_replicas(0)->set_center_id("slow");
  const absl::Time again = later + absl::Minutes(6);
  jc::jobs::ApplyAttemptFailedToStart(job, 0, "unknown resource spec", again, &fx);
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), again) == std::vector<std::string>{"slow", "fast"});
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), later + jc::scheduler::kRefusalHold) == std::vector<std::string>{"slow"});
  CHECK(job.replicas(0).refused_centers_size() == 2);  // each center once
}

TEST_CASE("a refusal recorded after the clock stepped back holds the earlier refusals as long as before [A7][A16]",
          "[A7][A16]") {
  v1::JobRecord job = PendingJob(1, "slow", /*gang=*/false);
  job.mutable_request()->mutable_retry_policy()->set_max_retries(5);
  JobEffects fx;
  job.mutable_replicas(0)->set_state(v1::ReplicaRecord::DISPATCHING);
  jc::jobs::ApplyAttemptFailedToStart(job, 0, "unknown resource spec", kT0, &fx);
  // A leader whose clock lags a minute records the next refusal.
  job.mutable_replicas(0)->set_state(v1::ReplicaRecord::DISPATCHING);
  job.mutable_replicas(0)->set_center_id("fast");
  jc::jobs::ApplyAttemptFailedToStart(job, 0, "staging failed", kT0 - absl::Minutes(1), &fx);
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), kT0 + absl::Minutes(9) + absl::Seconds(30)) ==
        std::vector<std::string>{"slow"});
  // And a center refusing again at the lagging clock keeps its later time.
  job.mutable_replicas(0)->set_state(v1::ReplicaRecord::DISPATCHING);
  job.mutable_replicas(0)->set_center_id("slow");
  jc::jobs::ApplyAttemptFailedToStart(job, 0, "unknown resource spec", kT0 - absl::Minutes(2), &fx);
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), kT0 + absl::Minutes(9) + absl::Seconds(30)) ==
        std::vector<std::string>{"slow"});
}

TEST_CASE("a record stored before each refusal had its own time holds every refused center from its latest refusal "
          "[A7][A16]",
          "[A7][A16]") {
  v1::JobRecord job = PendingJob(1, "slow", /*gang=*/false);
  job.mutable_request()->mutable_retry_policy()->set_max_retries(5);
  auto* r = job.mutable_replicas(0);
  r->add_refused_centers("slow");
  r->add_refused_centers("fast");
  *r->mutable_refused_at() = jc::ToTimestamp(kT0);
  CHECK(jc::jobs::HeldRefusals(*r, kT0 + absl::Minutes(1)) == std::vector<std::string>{"slow", "fast"});
  CHECK(jc::jobs::HeldRefusals(*r, kT0 + jc::scheduler::kRefusalHold).empty());
  // A new refusal by one of them keeps the others' old time.
  r->set_state(v1::ReplicaRecord::DISPATCHING);
  r->set_center_id("fast");
  JobEffects fx;
  jc::jobs::ApplyAttemptFailedToStart(job, 0, "unknown resource spec", kT0 + absl::Minutes(5), &fx);
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), kT0 + jc::scheduler::kRefusalHold) == std::vector<std::string>{"fast"});
}

TEST_CASE("what a center refused of one replica it is taken to refuse of the task's every replica not ended, so that "
          "a gang's siblings are not sent there in turn [A7][A8]",
          "[A7][A8]") {
  v1::JobRecord job = PendingJob(3, "slow", /*gang=*/true);
  job.mutable_request()->mutable_retry_policy()->set_max_retries(5);
  job.mutable_replicas(2)->set_state(v1::ReplicaRecord::SUCCEEDED);  // ended: nothing to hold
  job.mutable_replicas(0)->set_state(v1::ReplicaRecord::DISPATCHING);
  JobEffects fx;
  jc::jobs::ApplyAttemptFailedToStart(job, 0, "unknown resource spec", kT0, &fx);
  CHECK(jc::jobs::HeldRefusals(job.replicas(0), kT0) == std::vector<std::string>{"slow"});
  CHECK(jc::jobs::HeldRefusals(job.replicas(1), kT0) == std::vector<std::string>{"slow"});
  CHECK(jc::jobs::HeldRefusals(job.replicas(2), kT0).empty());
}

}  // namespace
