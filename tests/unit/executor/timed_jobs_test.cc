// Timed jobs' decisions (SPEC B5): when runs are submitted, what overlap skip, queue and
// kill do with a run still going, start timeouts, retries and missed runs. A fake clock:
// each step is given its `now`.

#include <catch2/catch.hpp>

#include "common/timestamp.h"
#include "executor/master/timed_jobs.h"

using namespace jc::nexec;
using jc::FromTimestamp;
using jc::ToTimestamp;

namespace {

const absl::TimeZone kUtc = absl::UTCTimeZone();

absl::Time At(int hour, int minute, int second = 0) {
  return absl::FromCivil(absl::CivilSecond(2026, 11, 24, hour, minute, second), kUtc);
}

// A timed job due every 10 minutes from 10:00, created at 09:55.
struct Fixture {
  pb::TimedJob tj;
  Schedule schedule = *Schedule::Parse("*/10 * * * *");
  int64_t next_job = 100;

  explicit Fixture(const std::string& overlap, int retries = 0, int start_timeout_seconds = 0) {
    tj.set_id(7);
    tj.set_overlap(overlap);
    tj.set_retries(retries);
    tj.set_start_timeout_seconds(start_timeout_seconds);
    *tj.mutable_next_run() = ToTimestamp(schedule.Next(At(9, 55), kUtc));
  }
  // One step; submissions are recorded as jobs 100, 101, ...
  std::vector<TimedAction> Step(absl::Time now, const TimedRunState& run) {
    auto actions = StepTimedJob(tj, schedule, now, kUtc, run);
    for (const auto& a : actions) {
      if (a.kind == TimedAction::Kind::kSubmit) RecordRun(tj, a, next_job++, now, kUtc);
    }
    return actions;
  }
};

TimedRunState Running() { return {true, true, true, false, "RUNNING"}; }
TimedRunState Pending() { return {true, true, false, false, "PENDING"}; }
TimedRunState Done() { return {true, false, true, false, "DONE"}; }
TimedRunState Failed() { return {true, false, true, true, "EXIT"}; }

std::string LastHistory(const pb::TimedJob& tj) { return tj.history().empty() ? "" : tj.history(tj.history_size() - 1); }

}  // namespace

TEST_CASE("a timed job submits a run each time its schedule is due, and nothing between", "[B5]") {
  Fixture f("skip");
  CHECK(f.Step(At(9, 59, 59), {}).empty());
  auto first = f.Step(At(10, 0, 0), {});
  REQUIRE(first.size() == 1);
  CHECK(first[0].kind == TimedAction::Kind::kSubmit);
  CHECK(first[0].due == At(10, 0));
  CHECK(TimedRunKey(f.tj, first[0]) == absl::StrCat("timed-7-", absl::ToUnixSeconds(At(10, 0)), "-0"));
  CHECK(f.tj.run_job_id() == 100);
  CHECK(FromTimestamp(f.tj.next_run()) == At(10, 10));
  CHECK(f.Step(At(10, 5), Running()).empty());
  auto second = f.Step(At(10, 10, 1), Done());
  REQUIRE(second.size() == 1);
  CHECK(second[0].due == At(10, 10));
  CHECK(f.tj.runs() == 2);
}

TEST_CASE("overlap skip, queue and kill decide what a run due while the previous one runs does", "[B5]") {
  SECTION("skip: not submitted, counted, said why") {
    Fixture f("skip");
    f.Step(At(10, 0), {});
    CHECK(f.Step(At(10, 10), Running()).empty());
    CHECK(f.tj.skipped() == 1);
    CHECK(LastHistory(f.tj).find("run due at 2026-11-24 10:10:00 skipped: job 100 is RUNNING") != std::string::npos);
    CHECK(FromTimestamp(f.tj.next_run()) == At(10, 20));
  }
  SECTION("queue: one run waits and is submitted when the previous ends; a second one due meanwhile is skipped") {
    Fixture f("queue");
    f.Step(At(10, 0), {});
    CHECK(f.Step(At(10, 10), Running()).empty());
    CHECK(f.tj.has_queued_due_at());
    CHECK(f.Step(At(10, 20), Running()).empty());
    CHECK(f.tj.skipped() == 1);
    auto after = f.Step(At(10, 25), Done());
    REQUIRE(after.size() == 1);
    CHECK(after[0].due == At(10, 10));  // the queued one, for its own due time
    CHECK_FALSE(f.tj.has_queued_due_at());
    CHECK(f.tj.run_job_id() == 101);
  }
  SECTION("kill: the previous run is killed with the reason and the new one submitted") {
    Fixture f("kill");
    f.Step(At(10, 0), {});
    auto actions = f.Step(At(10, 10), Running());
    REQUIRE(actions.size() == 2);
    CHECK(actions[0].kind == TimedAction::Kind::kKill);
    CHECK(actions[0].job_id == 100);
    CHECK(actions[0].reason == "timed job 7: killed for its run due at 2026-11-24 10:10:00");
    CHECK(actions[1].kind == TimedAction::Kind::kSubmit);
    CHECK(f.tj.run_job_id() == 101);
  }
}

TEST_CASE("a run that does not start within the start timeout is killed and not retried", "[B5]") {
  Fixture f("skip", /*retries=*/2, /*start_timeout_seconds=*/120);
  f.Step(At(10, 0), {});
  CHECK(f.Step(At(10, 1, 59), Pending()).empty());
  auto actions = f.Step(At(10, 2), Pending());
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == TimedAction::Kind::kKill);
  CHECK(actions[0].reason == "timed job 7: did not start within 2m of its run due at 2026-11-24 10:00:00");
  CHECK(f.Step(At(10, 2, 1), Pending()).empty());  // killed once
  // It ended EXIT by that kill: no retry.
  CHECK(f.Step(At(10, 3), {true, false, false, false, "EXIT"}).empty());
  // A run that started is never killed by the timeout.
  Fixture g("skip", 0, 60);
  g.Step(At(10, 0), {});
  CHECK(g.Step(At(10, 5), Running()).empty());
}

TEST_CASE("a failed run is retried up to the retry count, for the same due time", "[B5]") {
  Fixture f("skip", /*retries=*/2);
  f.Step(At(10, 0), {});
  auto retry1 = f.Step(At(10, 1), Failed());
  REQUIRE(retry1.size() == 1);
  CHECK(retry1[0].due == At(10, 0));
  CHECK(retry1[0].retry == 1);
  CHECK(TimedRunKey(f.tj, retry1[0]).substr(TimedRunKey(f.tj, retry1[0]).size() - 2) == "-1");
  CHECK(f.Step(At(10, 2), Running()).empty());
  CHECK(f.Step(At(10, 3), Failed()).size() == 1);  // retry 2
  CHECK(f.tj.run_retries() == 2);
  CHECK(f.Step(At(10, 4), Failed()).empty());  // no retries left
  CHECK(f.tj.runs() == 3);
  // A success is not retried.
  Fixture g("skip", 3);
  g.Step(At(10, 0), {});
  CHECK(g.Step(At(10, 1), Done()).empty());
}

TEST_CASE("a run due while the master was down is skipped, not submitted late", "[B5]") {
  Fixture f("skip");
  CHECK(f.Step(At(10, 45), {}).empty());
  CHECK(f.tj.skipped() == 1);
  CHECK(LastHistory(f.tj).find("run due at 2026-11-24 10:00:00 missed") != std::string::npos);
  CHECK(FromTimestamp(f.tj.next_run()) == At(10, 50));
  CHECK(f.Step(At(10, 50, 30), {}).size() == 1);  // within a minute of its time: submitted
}
