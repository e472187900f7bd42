// Reservation and backfill in the executor's scheduler (SPEC B5), with a fake clock:
// a blocked big job reserves the hosts it will get; only jobs whose run limit ends
// before that start may use them meanwhile, so the big job is never delayed.

#include <catch2/catch.hpp>

#include "executor/policy/scheduler.h"
#include "tests/unit/executor/scheduler_cycle.h"

using namespace jc::nexec;

namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

Scheduler BackfillCluster(int slots) {
  QueueConfig q;
  q.name = "normal";
  q.backfill = true;
  return testing::OneHost(slots, q);
}

JobRequest Limited(int64_t id, int slots, absl::Duration limit) {
  JobRequest r = testing::MakeJob(id, "u", slots, "normal", "");
  r.run_limit = limit;
  return r;
}

std::set<int64_t> Ids(const std::vector<Placement>& placed) {
  std::set<int64_t> out;
  for (const auto& p : placed) out.insert(p.job_id);
  return out;
}

std::set<int64_t> Ids(const std::map<int64_t, Placement>& placed) {
  std::set<int64_t> out;
  for (const auto& [id, p] : placed) out.insert(id);
  return out;
}

// A backfill queue and host h1 (8 slots, 64 GB, and what `h` adds), where job 1 holds
// 60 GB for an hour from kT0: a job that needs memory waits for it, and reserves.
Scheduler MemoryHeldCluster(HostConfig h) {
  QueueConfig q;
  q.name = "normal";
  q.backfill = true;
  Scheduler s;
  h.name = "h1";
  h.slots = 8;
  h.mem_mb = 65536;
  REQUIRE(s.AddHost(h).ok());
  REQUIRE(s.AddQueue(q).ok());
  s.SetNow(kT0);
  JobRequest a = testing::MakeJob(1, "u", 1, "normal", "rusage[mem=60000]");
  a.run_limit = absl::Hours(1);
  REQUIRE(testing::RunCycle(s, {a}).size() == 1);
  return s;
}

}  // namespace

TEST_CASE("backfill: short jobs use a big job's reserved slots only if they end before it starts", "[B5]") {
  Scheduler s = BackfillCluster(4);
  s.SetNow(kT0);
  REQUIRE(testing::RunCycle(s, {Limited(1, 2, absl::Minutes(60))}).size() == 1);  // A: ends by T0+60m

  // Submitted in this order: the big job J, a 2-hour job, one without a run limit, and a
  // 30-minute one.
  for (const auto& j : {Limited(10, 4, absl::Hours(1)), Limited(11, 1, absl::Hours(2)),
                        testing::MakeJob(12, "u", 1, "normal", ""), Limited(13, 1, absl::Minutes(30))}) {
    REQUIRE(s.Submit(j).ok());
  }
  CycleStats stats;
  std::vector<Placement> placed = s.Cycle(&stats);
  CHECK(Ids(placed) == std::set<int64_t>{13});  // only the 30-minute job, backfilled
  REQUIRE(placed.size() == 1);
  CHECK(placed[0].backfilled_before == 10);
  CHECK(stats.backfilled == 1);
  auto reservation = s.ReservationOf(10);
  REQUIRE(reservation.has_value());
  CHECK(reservation->hosts == std::vector<std::string>{"h1"});
  CHECK(reservation->start == kT0 + absl::Minutes(60));
  CHECK(s.PendingReason(10) == "reserved h1 to start by 2027-01-15 09:00:00 UTC");
  CHECK(s.free_slots("h1") == 1);  // between cycles nothing is held: each cycle reserves again

  // T0+30m: the short job ended; another 20-minute one still fits before the start.
  s.SetNow(kT0 + absl::Minutes(30));
  REQUIRE(s.Release(13).ok());
  CHECK(Ids(testing::RunCycle(s, {Limited(14, 1, absl::Minutes(20)), Limited(15, 1, absl::Minutes(45))})) ==
        std::set<int64_t>{14});  // 45 minutes would end after T0+60m

  // T0+60m: A and the backfilled job are over: J starts on time; the others wait.
  s.SetNow(kT0 + absl::Minutes(60));
  REQUIRE(s.Release(1).ok());
  REQUIRE(s.Release(14).ok());
  placed = s.Cycle();
  CHECK(Ids(placed) == std::set<int64_t>{10});
  CHECK_FALSE(s.ReservationOf(10).has_value());
}

TEST_CASE("backfill: a job in the way without a run limit makes the start unknown, and nothing backfills", "[B5]") {
  Scheduler s = BackfillCluster(4);
  s.SetNow(kT0);
  REQUIRE(testing::RunCycle(s, {testing::MakeJob(1, "u", 2, "normal", "")}).size() == 1);
  auto placed = testing::RunCycle(s, {Limited(10, 4, absl::Hours(1)), Limited(11, 1, absl::Minutes(1))});
  CHECK(placed.empty());
  auto reservation = s.ReservationOf(10);
  REQUIRE(reservation.has_value());
  CHECK(reservation->start == absl::InfiniteFuture());
  CHECK(s.PendingReason(10) == "reserved h1 (start unknown: a job there has no run limit)");
}

TEST_CASE("without backfill a queue behaves as before: later jobs take free slots and nothing is reserved", "[B5]") {
  Scheduler s;
  HostConfig h;
  h.name = "h1";
  h.slots = 4;
  REQUIRE(s.AddHost(h).ok());
  QueueConfig q;
  q.name = "normal";
  REQUIRE(s.AddQueue(q).ok());
  s.SetNow(kT0);
  REQUIRE(testing::RunCycle(s, {Limited(1, 2, absl::Minutes(60))}).size() == 1);
  auto placed = testing::RunCycle(s, {Limited(10, 4, absl::Hours(1)), testing::MakeJob(11, "u", 2, "normal", "")});
  CHECK(Ids(placed) == std::set<int64_t>{11});
  CHECK_FALSE(s.ReservationOf(10).has_value());
}

TEST_CASE("backfill: a reservation holds the GPUs and memory its job waits for, not only slots: on a host with "
          "more slots than GPUs a job that may not backfill does not start on them [B5]",
          "[B5]") {
  HostConfig h;
  h.gpus = {0, 1};
  Scheduler s = MemoryHeldCluster(h);

  // J waits for memory and needs both GPUs, free now; then a job without a run limit that
  // wants both GPUs, and a 30-minute one that wants one.
  JobRequest j = testing::MakeJob(10, "u", 1, "normal", "rusage[gpu=2:mem=40000]");
  j.run_limit = absl::Hours(1);
  JobRequest forever = testing::MakeJob(11, "u", 1, "normal", "rusage[gpu=2]");
  JobRequest brief = testing::MakeJob(12, "u", 1, "normal", "rusage[gpu=1]");
  brief.run_limit = absl::Minutes(30);
  for (const auto& job : {j, forever, brief}) REQUIRE(s.Submit(job).ok());
  std::vector<Placement> placed = s.Cycle();
  // Only the short job, on a GPU the reservation held (it ends before J starts).
  CHECK(Ids(placed) == std::set<int64_t>{12});
  REQUIRE(placed.size() == 1);
  CHECK(placed[0].backfilled_before == 10);
  auto reservation = s.ReservationOf(10);
  REQUIRE(reservation.has_value());
  CHECK(reservation->start == kT0 + absl::Hours(1));

  // T0+30m: the short job ended; the job without a run limit still may not take the GPUs.
  s.SetNow(kT0 + absl::Minutes(30));
  REQUIRE(s.Release(12).ok());
  CHECK(s.Cycle().empty());

  // T0+60m: A is over: J starts on time, on both GPUs; the other waits.
  s.SetNow(kT0 + absl::Hours(1));
  REQUIRE(s.Release(1).ok());
  placed = s.Cycle();
  CHECK(Ids(placed) == std::set<int64_t>{10});
  REQUIRE(placed.size() == 1);
  REQUIRE(placed[0].sections.size() == 1);
  CHECK(placed[0].sections[0][0].gpus.size() == 2);
}

TEST_CASE("backfill: a reservation holds the licenses its job will take, so a job that may not backfill does not "
          "take them first [B5][B1]",
          "[B5][B1]") {
  HostConfig h;
  h.resources["licenses"] = 2.0;
  Scheduler s = MemoryHeldCluster(h);
  // J waits for memory and needs both licenses, free now; the next job has no run limit
  // and wants both licenses (slots are free for it).
  JobRequest j = testing::MakeJob(10, "u", 1, "normal", "rusage[licenses=2:mem=40000]");
  j.run_limit = absl::Hours(1);
  JobRequest forever = testing::MakeJob(11, "u", 1, "normal", "rusage[licenses=2]");
  for (const auto& job : {j, forever}) REQUIRE(s.Submit(job).ok());
  CHECK(s.Cycle().empty());
  s.SetNow(kT0 + absl::Hours(1));
  REQUIRE(s.Release(1).ok());
  std::vector<Placement> placed = s.Cycle();
  CHECK(Ids(placed) == std::set<int64_t>{10});
}

// What the native adapter reports of the center's queue (SPEC A16): when a job of a shape,
// submitted now, would start by the backfill planner's reckoning. Nothing is submitted and
// the model is left as it was.
TEST_CASE("start estimate: now on free slots, else when running jobs end by their run limits, unknown behind a "
          "job without one [A16]",
          "[A16][B5]") {
  Scheduler s = BackfillCluster(4);
  s.SetNow(kT0);
  // Free: it would start at once.
  StartEstimate idle = s.EstimateStart(testing::MakeJob(0, "u", 2, "normal", ""));
  CHECK(idle.known());
  CHECK(idle.start == kT0);

  // Three slots busy for an hour, one for two: a 1-slot job starts now, a 2-slot one when
  // the hour ends, a 4-slot one when the two hours end.
  REQUIRE(testing::RunCycle(s, {Limited(1, 3, absl::Hours(1)), Limited(2, 1, absl::Hours(2))}).size() == 2);
  s.SetNow(kT0 + absl::Minutes(10));
  CHECK(s.EstimateStart(testing::MakeJob(0, "u", 1, "normal", "")).start == kT0 + absl::Hours(1));  // the host is full
  CHECK(s.EstimateStart(testing::MakeJob(0, "u", 2, "normal", "")).start == kT0 + absl::Hours(1));
  CHECK(s.EstimateStart(testing::MakeJob(0, "u", 3, "normal", "")).start == kT0 + absl::Hours(1));
  CHECK(s.EstimateStart(testing::MakeJob(0, "u", 4, "normal", "")).start == kT0 + absl::Hours(2));
  // The probes left nothing behind: the next cycle sees only the two running jobs.
  CHECK(s.pending() == 0);
  CHECK(s.free_slots("h1") == 0);

  // More slots than the cluster has: unknown, with the reason.
  StartEstimate huge = s.EstimateStart(testing::MakeJob(0, "u", 5, "normal", ""));
  CHECK_FALSE(huge.known());
  CHECK_FALSE(huge.reason.empty());
}

TEST_CASE("start estimate: a job without a run limit in the way makes the start unknown [A16]", "[A16][B5]") {
  Scheduler s = BackfillCluster(4);
  s.SetNow(kT0);
  REQUIRE(testing::RunCycle(s, {testing::MakeJob(1, "u", 4, "normal", "")}).size() == 1);
  StartEstimate blocked = s.EstimateStart(testing::MakeJob(0, "u", 1, "normal", ""));
  CHECK_FALSE(blocked.known());
  CHECK(blocked.reason == "a job in the way has no run limit");
}

TEST_CASE("start estimate: a reservation's held slots count as taken, unless the probe ends before it [A16]",
          "[A16][B5]") {
  Scheduler s = BackfillCluster(4);
  s.SetNow(kT0);
  REQUIRE(testing::RunCycle(s, {Limited(1, 2, absl::Hours(1))}).size() == 1);
  // A 4-slot job waits and reserves the host for T0+1h; two slots are free meanwhile.
  REQUIRE(s.Submit(Limited(10, 4, absl::Hours(1))).ok());
  REQUIRE(s.Cycle().empty());
  REQUIRE(s.ReservationOf(10).has_value());
  // A probe without a run limit may not take the held slots: not before job 1 ends.
  StartEstimate unlimited = s.EstimateStart(testing::MakeJob(0, "u", 1, "normal", ""));
  CHECK(unlimited.known());
  CHECK(unlimited.start == kT0 + absl::Hours(1));
  // One that ends before the reservation starts backfills now.
  JobRequest short_job = testing::MakeJob(0, "u", 1, "normal", "");
  short_job.run_limit = absl::Minutes(30);
  CHECK(s.EstimateStart(short_job).start == kT0);
  // And the reservation still holds after the probes: the reserved job starts when job 1 ends.
  REQUIRE(s.Release(1).ok());
  s.SetNow(kT0 + absl::Hours(1));
  CHECK(Ids(s.Cycle()) == std::set<int64_t>{10});
}
