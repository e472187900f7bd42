// A service's replica restarts without end (SPEC A17): what keeps that bounded — its back-off,
// which a center's clock cannot shorten, and its record, which keeps its latest attempts.

#include <catch2/catch.hpp>
#include <tuple>
#include <vector>

#include "common/timestamp.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/job_kind.h"
#include "services/jobs/job_state.h"

namespace jc::jobs {
namespace {

v1::JobRecord Service() {
  v1::JobRecord job;
  job.set_job_id("job-1");
  job.set_status("running");
  auto* task = job.mutable_request()->add_tasks();
  task->set_name("web");
  task->set_command("exit 1");
  task->set_kind("service");
  task->set_resource_spec_id("cpu-1");
  task->set_replica_number(1);
  auto* rep = job.add_replicas();
  rep->set_state(v1::ReplicaRecord::WAITING);
  return job;
}

// Places the job's replica 0 at `center` and has it accepted there running since `started`;
// the center's report of it.
apb::Replica StartRunning(v1::JobRecord& job, const std::string& center, absl::Time started) {
  auto* rep = job.mutable_replicas(0);
  rep->set_state(v1::ReplicaRecord::DISPATCHING);
  rep->set_center_id(center);
  NotePlaced(job, 0, started);
  apb::Replica running;
  running.mutable_key()->set_attempt(rep->attempt());
  running.set_state(apb::REPLICA_RUNNING);
  *running.mutable_started_at() = ToTimestamp(started);
  JobEffects fx;
  ApplySubmitAccepted(job, 0, running, started, &fx);
  return running;
}

// Places the replica at `center`, has it start at `started`, and has the center report it
// failed with `ended_at` as its end, which the control plane learns at `learnt`; returns
// the replica's back-off from then.
absl::Duration RunOnce(v1::JobRecord& job, const std::string& center, absl::Time started, absl::Time ended_at,
                       absl::Time learnt) {
  apb::Replica running = StartRunning(job, center, started);
  apb::Replica failed = running;
  failed.set_state(apb::REPLICA_FAILED);
  failed.set_exit_code(1);
  *failed.mutable_ended_at() = ToTimestamp(ended_at);
  JobEffects ended;
  ApplyAttemptReport(job, 0, center, failed, learnt, &ended);
  ApplyReport(job, 0, failed, learnt, &ended);
  REQUIRE(job.replicas(0).state() == v1::ReplicaRecord::WAITING);
  REQUIRE(ended.wait);
  return FromTimestamp(job.replicas(0).restart_after()) - learnt;
}

}  // namespace

TEST_CASE("a service that crashes for ever keeps a bounded record and a back-off its center's clock cannot shorten "
          "[A17][C6]",
          "[A17][C6]") {
  v1::JobRecord job = Service();
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  std::vector<absl::Duration> backoffs;
  for (int i = 0; i < 100; ++i) {
    // The center says each run ended a day after it started (a fast clock, or a lie): the
    // control plane learnt of the end a second after the start, so it was no long run.
    backoffs.push_back(RunOnce(job, i % 2 ? "alpha" : "beta", now, now + absl::Hours(24), now + absl::Seconds(1)));
    now += backoffs.back() + absl::Seconds(2);
  }
  CHECK(backoffs[0] == absl::Seconds(5));
  CHECK(backoffs[1] == absl::Seconds(10));
  CHECK(backoffs[2] == absl::Seconds(20));
  CHECK(backoffs[99] == absl::Minutes(5));
  CHECK(job.replicas(0).attempt() == 100);
  CHECK(job.replicas(0).attempts_size() <= kKeptAttempts);
  CHECK(job.replicas(0).attempts(job.replicas(0).attempts_size() - 1).attempt() == 99);
  CHECK(job.replicas(0).failed_centers_size() == 2);  // each center once
  CHECK(job.status() != "failed");

  // Moves are counted per start: a restart may be moved again (--max_moves is per start).
  job.mutable_replicas(0)->set_moves(3);
  job.mutable_replicas(0)->add_moved_from("alpha");
  RunOnce(job, "beta", now, now, now + absl::Seconds(1));
  CHECK(job.replicas(0).moves() == 0);
  CHECK(job.replicas(0).moved_from_size() == 0);
  now += absl::Minutes(6);

  // A run of ten minutes or more starts the count again.
  const absl::Time start = now;
  now += absl::Minutes(11);
  CHECK(RunOnce(job, "alpha", start, now, now) == absl::Seconds(5));
  CHECK(job.replicas(0).restarts_in_a_row() == 1);

  // Waiting since its restart fell due, not since it was submitted (never "overdue" for
  // having been submitted long ago).
  *job.mutable_received_at() = ToTimestamp(now - absl::Hours(72));
  CHECK(WaitingSince(job) == FromTimestamp(job.replicas(0).restart_after()));
}

// Attacker's review, session 34: scaling down and up again added an attempt to the replica
// each time, past the cap a restart keeps.
TEST_CASE("a service scaled down and up without end keeps a bounded record of each replica [A17][C6]", "[A17][C6]") {
  v1::JobRecord job = Service();
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  for (int cycle = 0; cycle < 100; ++cycle) {
    JobEffects up;
    ApplyScale(job, 0, 2, now, &up);
    const int index = job.replicas_size() - 1;  // replica 1: added once, brought back after
    REQUIRE(job.replicas(index).replica_index() == 1);
    REQUIRE(job.replicas(index).state() == v1::ReplicaRecord::WAITING);
    auto* rep = job.mutable_replicas(index);
    rep->set_state(v1::ReplicaRecord::DISPATCHING);
    rep->set_center_id("alpha");
    NotePlaced(job, index, now);
    apb::Replica running;
    running.mutable_key()->set_attempt(rep->attempt());
    running.set_state(apb::REPLICA_RUNNING);
    *running.mutable_started_at() = ToTimestamp(now);
    JobEffects accepted;
    ApplySubmitAccepted(job, index, running, now, &accepted);
    now += absl::Seconds(30);
    JobEffects down;
    ApplyScale(job, 0, 1, now, &down);
    REQUIRE(down.stop.size() == 1);
    apb::Replica stopped = running;
    stopped.set_state(apb::REPLICA_STOPPED);
    *stopped.mutable_ended_at() = ToTimestamp(now);
    JobEffects ended;
    ApplyAttemptReport(job, index, "alpha", stopped, now, &ended);
    CHECK(ended.metered.size() == 1);  // every run metered, however many
    now += absl::Seconds(30);
  }
  CHECK(job.replicas(1).attempts_size() <= kKeptAttempts);
  CHECK(job.replicas(1).attempt() == 99);
  CHECK(job.status() == "pending");  // replica 0 never placed here; the one scaled away fails nothing
}

TEST_CASE("an interactive job stopped for being idle ends completed saying why, as one its user stopped, and one stopped "
          "by a limit fails [A17]",
          "[A17]") {
  const std::string idle = std::string(kIdleStop) + " 30 min (no request through its endpoints, nor use its replica "
                                                    "reported, since 2026-11-30 11:42:11 UTC)";
  const std::string limit = "stopped: replica 0 of task nb ran past the job's time limit of 2.0 h";
  for (const auto& [reason, status, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"", "completed", "stopped by the user (an interactive job ends when stopped)"},
           {idle, "completed", idle},
           {limit, "failed", limit}}) {
    INFO(reason);
    v1::JobRecord job = Service();
    job.mutable_request()->mutable_tasks(0)->set_kind("interactive");
    const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
    apb::Replica running = StartRunning(job, "alpha", now);
    REQUIRE(job.status() == "running");
    job.set_stop_reason(reason);
    JobEffects stopping;
    ApplyStopRequested(job, now, &stopping);
    CHECK(stopping.stop.size() == 1);
    apb::Replica stopped = running;
    stopped.set_state(apb::REPLICA_STOPPED);
    *stopped.mutable_ended_at() = ToTimestamp(now + absl::Seconds(1));
    JobEffects ended;
    ApplyAttemptReport(job, 0, "alpha", stopped, now + absl::Seconds(1), &ended);
    ApplyReport(job, 0, stopped, now + absl::Seconds(1), &ended);
    CHECK(job.status() == status);
    CHECK(job.status_reason() == says);
  }
}

}  // namespace jc::jobs
