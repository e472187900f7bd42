// Keeps at the scheduler (SPEC A16): a job placement found no room for keeps the centers that
// could ever take it; those keeps steer other jobs' replicas only among centers that can start
// them now, never make a job look unrunnable, and never hold a gang back. Moves see keeps
// and drains as placements do; stepping down drops both.

#include <catch2/catch.hpp>

#include "common/clock.h"
#include "services/scheduler/scheduler.h"
#include "tests/testing/fixtures.h"

namespace jc::scheduler {
namespace {

// Two centers of 4 CPUs: east (2 free) and west (4 free, or west_free). c1 (1 CPU) at both,
// cheaper at east; c3 (3 CPUs) only at east (or where c3_at says); c4 (4 CPUs) only at west.
// With north (4 CPUs free), c2 (1 CPU) at east and north.
class TwoCenters final : public InputsSource {
 public:
  std::string cheap = "east";  // where every spec is priced 1 (5 elsewhere)
  std::string c3_at = "east";  // where c3 is offered
  int west_free = 4;
  bool with_north = false;
  absl::StatusOr<SchedulerInputs> Fetch() override {
    SchedulerInputs in;
    std::vector<std::string> ids = {"east", "west"};
    if (with_north) ids.push_back("north");
    for (const std::string& id : ids) {
      auto c = jc::testing::MakeCenter(id);
      c.set_status(1);
      c.set_security_grade(3);
      c.set_network_topology(std::string("cn/") + id);
      c.mutable_capacity()->set_cpu(4);
      c.mutable_capacity()->set_gpu(0);
      in.centers.push_back(c);
      monitor::CenterObservation o;
      o.center = c;
      o.has_usage = true;
      o.usage.mutable_free()->set_cpu(id == "east" ? 2 : id == "west" ? west_free : 4);
      o.usage.mutable_free()->set_memory(512 * 1024);
      in.observations.push_back(o);
    }
    auto spec = [&](const std::string& id, int cpus, const std::string& where) {
      auto s = jc::testing::MakeSpec(id, where);
      (*s.mutable_resource_quantity())["cpu"] = std::to_string(cpus);
      (*s.mutable_resource_quantity())["gpu"] = "0";
      (*s.mutable_resource_quantity())["memory"] = "1Gi";
      in.specs.push_back(s);
      for (const std::string& center : ids) {
        if (where.find(center) == std::string::npos) continue;
        v1::SpecCenterOffer offer;
        offer.set_resource_spec_id(id);
        offer.set_ai_center_id(center);
        offer.set_can_run(true);
        offer.set_price(center == cheap ? "1" : "5");
        in.offers.push_back(offer);
      }
    };
    spec("c1", 1, "east,west");
    spec("c3", 3, c3_at);
    spec("c4", 4, "west");
    if (with_north) spec("c2", 1, "east,north");
    return in;
  }
};

v1::CreateTrainJobRequest Job(std::vector<std::string> specs, bool gang) {
  v1::CreateTrainJobRequest job;
  job.set_name("job");
  job.set_project("p");
  job.mutable_scheduling()->set_gang(gang);
  job.mutable_scheduling()->set_weight_profile("cost");
  for (size_t i = 0; i < specs.size(); ++i) {
    auto* t = job.add_tasks();
    t->set_name("t" + std::to_string(i));
    t->set_command("true");
    t->set_resource_spec_id(specs[i]);
    t->set_replica_number(1);
  }
  return job;
}

std::vector<Scheduler::Slot> Slots(size_t tasks) {
  std::vector<Scheduler::Slot> out;
  for (size_t i = 0; i < tasks; ++i) out.push_back({static_cast<int>(i), 0, 0, {}});
  return out;
}

TEST_CASE("a keep steers a replica only among centers that can start it now, in a plan as in a placement: never a "
          "reason a job could never run, and never one a gang waits for [A16]",
          "[A16]") {
  TwoCenters source;
  FakeClock clock;
  Scheduler s(&source, &clock, SchedulerOptions{});
  REQUIRE(s.Refresh().ok());
  // The 3-CPU job waits for east (2 free): it keeps east.
  s.BeginPass();
  auto narrow = s.Place("job-narrow", Job({"c3"}, false), Slots(1), {});
  REQUIRE(narrow.ok());
  CHECK_FALSE(narrow->placed);
  s.EndPass();

  // A 1-CPU job would take cheap east; kept, it goes to west, which can start it now.
  auto small = s.Place("job-small", Job({"c1"}, false), Slots(1), {});
  REQUIRE(small.ok());
  REQUIRE(small->placed);
  CHECK(small->centers[0] == "west");
  s.Forget(Scheduler::ReservationKey("job-small", 0, 0, 0));
  // A plan says the same, and why.
  auto plan = s.Plan(Job({"c1"}, false));
  REQUIRE(plan.ok());
  REQUIRE(plan->replicas_size() == 1);
  CHECK(plan->replicas(0).center_id() == "west");
  for (const auto& c : plan->replicas(0).centers()) {
    if (c.center_id() == "east") CHECK(c.filtered_by() == "kept_for_narrower_job");
  }

  // Tasks c1 and c4, not a gang: c1 goes to west (east kept), c4 then waits for west. On
  // whole centers it would run (c1 at east, c4 at west): it is not one no center can ever run.
  auto two = s.Place("job-two", Job({"c1", "c4"}, false), Slots(2), {});
  REQUIRE(two.ok());
  CHECK_FALSE(two->placed);
  CHECK(two->never.empty());
  s.Forget(Scheduler::ReservationKey("job-two", 0, 0, 0));

  // The same as a gang: kept off east, c1 would leave c4 no room at west; the gang is placed
  // without keeps rather than wait for them: c1 at east, c4 at west.
  auto gang = s.Place("job-gang", Job({"c1", "c4"}, true), Slots(2), {});
  REQUIRE(gang.ok());
  REQUIRE(gang->placed);
  CHECK(gang->centers == std::vector<std::string>{"east", "west"});
}

TEST_CASE("a gang whose wide task only one center can hold is placed narrowest first, and is not refused as one no "
          "center could ever run [A8][A16]",
          "[A8][A16]") {
  TwoCenters source;
  source.cheap = "west";
  FakeClock clock;
  Scheduler s(&source, &clock, SchedulerOptions{});
  REQUIRE(s.Refresh().ok());
  // c1 (anywhere, cheaper at west) then c4 (only west, all of it). In task order c1 takes
  // one of west's CPUs and leaves c4 no room; narrowest first, c4 takes west and c1 east.
  v1::CreateTrainJobRequest job = Job({"c1", "c4"}, true);
  auto never = s.NeverRuns(job);
  REQUIRE(never.ok());
  CHECK(never->empty());
  auto placed = s.Place("job-gang", job, Slots(2), {});
  REQUIRE(placed.ok());
  INFO(placed->reason);
  REQUIRE(placed->placed);
  CHECK(placed->centers == std::vector<std::string>{"east", "west"});
}

TEST_CASE("moves see drains and keeps as a placement does, and stepping down drops both [A16]", "[A16]") {
  TwoCenters source;
  FakeClock clock;
  Scheduler s(&source, &clock, SchedulerOptions{});
  REQUIRE(s.Refresh().ok());
  // A 1-CPU replica has waited 20 minutes at west; east can start it now.
  const v1::CreateTrainJobRequest small = Job({"c1"}, false);
  const Scheduler::MoveQuestion waiting{"job-small", &small, Slots(1), "west", absl::Minutes(20)};
  auto answers = s.MoveTargets({waiting}, 0.05);
  REQUIRE(answers.size() == 1);
  INFO(answers[0].why);
  CHECK(answers[0].to == "east");

  // The 3-CPU job (only east offers c3), past the longest wait, has east drain for it: with
  // no queue report from east nothing else starts there, a move no more than a placement.
  s.BeginPass();
  auto drained = s.Drain("job-wide", Job({"c3"}, false), Slots(1)[0]);
  REQUIRE(drained.ok());
  CHECK(*drained == "east");
  s.EndPass();
  answers = s.MoveTargets({waiting}, 0.05);
  REQUIRE(answers.size() == 1);
  INFO(answers[0].why);
  CHECK(answers[0].to.empty());
  auto placed = s.Place("job-other", Job({"c1"}, false), Slots(1), {});
  REQUIRE(placed.ok());
  REQUIRE(placed->placed);
  CHECK(placed->centers[0] == "west");
  s.Forget(Scheduler::ReservationKey("job-other", 0, 0, 0));

  // Stepping down drops the drain: a new leader decides its own.
  s.ClearPasses();
  answers = s.MoveTargets({waiting}, 0.05);
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].to == "east");

  // A keep too: the 3-CPU job waits and keeps east; the 1-CPU job goes to west; after a
  // step-down it takes cheap east again.
  s.BeginPass();
  auto narrow = s.Place("job-narrow", Job({"c3"}, false), Slots(1), {});
  REQUIRE(narrow.ok());
  CHECK_FALSE(narrow->placed);
  s.EndPass();
  placed = s.Place("job-other", Job({"c1"}, false), Slots(1), {});
  REQUIRE(placed.ok());
  REQUIRE(placed->placed);
  CHECK(placed->centers[0] == "west");
  s.Forget(Scheduler::ReservationKey("job-other", 0, 0, 0));
  s.ClearPasses();
  placed = s.Place("job-other", Job({"c1"}, false), Slots(1), {});
  REQUIRE(placed.ok());
  REQUIRE(placed->placed);
  CHECK(placed->centers[0] == "east");
}


// Five centers of 8 CPUs, all free: "fast" (every spec priced 1) and four others (5);
// "c8" (all 8 CPUs) only at fast, "c1" everywhere.
class FiveCenters final : public InputsSource {
 public:
  bool o4_down = false;  // its heartbeat stopped
  absl::StatusOr<SchedulerInputs> Fetch() override {
    SchedulerInputs in;
    const std::vector<std::string> ids = {"fast", "o1", "o2", "o3", "o4"};
    for (const std::string& id : ids) {
      auto c = jc::testing::MakeCenter(id);
      c.set_status(id == "o4" && o4_down ? 0 : 1);
      c.set_security_grade(3);
      c.set_network_topology("cn/" + id);
      c.mutable_capacity()->set_cpu(8);
      c.mutable_capacity()->set_gpu(0);
      in.centers.push_back(c);
      monitor::CenterObservation o;
      o.center = c;
      o.has_usage = true;
      o.usage.mutable_free()->set_cpu(8);
      o.usage.mutable_free()->set_memory(512 * 1024);
      in.observations.push_back(o);
    }
    auto spec = [&](const std::string& id, int cpus, const std::vector<std::string>& where) {
      std::string list;
      for (const auto& w : where) list += (list.empty() ? "" : ",") + w;
      auto s = jc::testing::MakeSpec(id, list);
      (*s.mutable_resource_quantity())["cpu"] = std::to_string(cpus);
      (*s.mutable_resource_quantity())["gpu"] = "0";
      (*s.mutable_resource_quantity())["memory"] = "1Gi";
      in.specs.push_back(s);
      for (const std::string& center : where) {
        v1::SpecCenterOffer offer;
        offer.set_resource_spec_id(id);
        offer.set_ai_center_id(center);
        offer.set_can_run(true);
        offer.set_price(center == "fast" ? "1" : "5");
        in.offers.push_back(offer);
      }
    };
    spec("c1", 1, ids);
    spec("c8", 8, {"fast"});
    return in;
  }
};

TEST_CASE("a spec only one center of five offers keeps it for a day from its last job against jobs that could run "
          "anywhere, in placements and plans, not for a job that names its centers, and stepping down forgets [A16]",
          "[A16]") {
  FiveCenters source;
  FakeClock clock;
  Scheduler s(&source, &clock, SchedulerOptions{});
  REQUIRE(s.Refresh().ok());
  auto place_small = [&](const std::string& id) {
    auto placed = s.Place(id, Job({"c1"}, false), Slots(1), {});
    REQUIRE(placed.ok());
    REQUIRE(placed->placed);
    s.Forget(Scheduler::ReservationKey(id, 0, 0, 0));
    return placed->centers[0];
  };
  s.BeginPass();
  CHECK(place_small("job-a") == "fast");  // the cheapest, nothing asked for c8 yet
  // A job that names fast asks for c8: its narrowness is its own, it keeps nothing.
  v1::CreateTrainJobRequest pinned = Job({"c8"}, false);
  pinned.mutable_tasks(0)->add_center_ids("fast");
  auto named = s.Place("job-named", pinned, Slots(1), {});
  REQUIRE(named.ok());
  REQUIRE(named->placed);
  s.Forget(Scheduler::ReservationKey("job-named", 0, 0, 0));
  s.EndPass();
  s.BeginPass();
  CHECK(place_small("job-b") == "fast");
  // A job of c8 (it fits, and runs): from the next pass on fast is kept for c8.
  auto wide = s.Place("job-wide", Job({"c8"}, false), Slots(1), {});
  REQUIRE(wide.ok());
  REQUIRE(wide->placed);
  s.Forget(Scheduler::ReservationKey("job-wide", 0, 0, 0));
  s.EndPass();
  s.BeginPass();
  CHECK(place_small("job-c") != "fast");
  auto plan = s.Plan(Job({"c1"}, false));
  REQUIRE(plan.ok());
  REQUIRE(plan->replicas_size() == 1);
  CHECK(plan->replicas(0).center_id() != "fast");
  bool said = false;
  for (const auto& c : plan->replicas(0).centers()) {
    if (c.center_id() != "fast") continue;
    said = true;
    CHECK(c.filtered_by() == "kept_for_narrower_job");
    CHECK(c.reason().find("kept for spec c8, placed within the last day, which only 1 center could run") !=
          std::string::npos);
  }
  CHECK(said);
  // A job with a time limit of 30 minutes ends soon: it may take fast.
  v1::CreateTrainJobRequest quick = Job({"c1"}, false);
  quick.mutable_time_limit()->set_seconds(1800);
  auto q = s.Place("job-quick", quick, Slots(1), {});
  REQUIRE(q.ok());
  REQUIRE(q->placed);
  CHECK(q->centers[0] == "fast");
  s.Forget(Scheduler::ReservationKey("job-quick", 0, 0, 0));
  s.EndPass();
  // A day after the c8 job fast is the small jobs' again.
  clock.Advance(absl::Hours(25));
  s.BeginPass();
  CHECK(place_small("job-d") == "fast");
  s.EndPass();
  // Stepping down forgets what was asked for: the next leader learns its own.
  s.BeginPass();
  auto again = s.Place("job-wide-2", Job({"c8"}, false), Slots(1), {});
  REQUIRE(again.ok());
  s.Forget(Scheduler::ReservationKey("job-wide-2", 0, 0, 0));
  s.EndPass();
  s.ClearPasses();
  s.BeginPass();
  CHECK(place_small("job-e") == "fast");
  s.EndPass();
}

TEST_CASE("a refresh between two placements of one pass counts a replica's breadth anew, so with one of its five "
          "centers gone the scarce spec's center is no longer kept from it [A16]",
          "[A16]") {
  // helper-58: the placer remembered a plain replica's breadth by the pass's generation and
  // the snapshot's address, and a refresh rebuilds the snapshot there in the middle of a pass.
  FiveCenters source;
  FakeClock clock;
  Scheduler s(&source, &clock, SchedulerOptions{});
  REQUIRE(s.Refresh().ok());
  auto place = [&](const std::string& id, const std::vector<std::string>& specs) {
    auto placed = s.Place(id, Job(specs, false), Slots(1), {});
    REQUIRE(placed.ok());
    REQUIRE(placed->placed);
    s.Forget(Scheduler::ReservationKey(id, 0, 0, 0));
    return placed->centers[0];
  };
  s.BeginPass();
  CHECK(place("job-wide", {"c8"}) == "fast");
  s.EndPass();
  s.BeginPass();
  CHECK(place("job-a", {"c1"}) != "fast");  // five centers could run it: fast is kept for c8
  source.o4_down = true;
  REQUIRE(s.Refresh().ok());
  CHECK(place("job-b", {"c1"}) == "fast");  // four now, fewer than five times c8's one
  s.EndPass();
}


// c3 offered at both centers: west idle, east busy (2 of its 4 CPUs free).
struct C3AtBoth {
  FakeClock clock;
  TwoCenters source;
  Scheduler s{&source, &clock, SchedulerOptions{}};
  C3AtBoth() {
    source.c3_at = "east,west";
    REQUIRE(s.Refresh().ok());
  }
};

TEST_CASE("an overdue job refused at the idle center drains the busy one that could run it, and the idle one stays "
          "open to others [A16][A7]",
          "[A16][A7]") {
  C3AtBoth both;
  Scheduler& s = both.s;
  auto job = Job({"c3"}, false);
  job.set_project("px");
  const std::vector<Scheduler::Slot> refused = {{0, 0, 1, {"west"}, {"west"}}};
  auto x = s.Place("job-x", job, refused, {});
  REQUIRE(x.ok());
  CHECK_FALSE(x->placed);  // it waits for east: west refused it
  s.BeginPass();
  auto drained = s.Drain("job-x", job, refused[0]);
  REQUIRE(drained.ok());
  CHECK(*drained == "east");  // where it can go once it frees up, not where it will not go
  s.EndPass();
  // West takes another job.
  auto y = s.Place("job-y", Job({"c3"}, false), Slots(1), {});
  REQUIRE(y.ok());
  INFO(y->reason);
  CHECK(y->placed);
  // Refused everywhere it could ever run: the drain goes to the refusing center.
  s.Forget(Scheduler::ReservationKey("job-y", 0, 0, 0));
  s.BeginPass();
  const Scheduler::Slot everywhere{0, 0, 1, {"west", "east"}, {"west", "east"}};
  drained = s.Drain("job-z", job, everywhere);
  REQUIRE(drained.ok());
  CHECK_FALSE(drained->empty());
  s.EndPass();
}

TEST_CASE("an overdue job no center drains for, while one could run it, is told why: each drains for another job or "
          "refused it [A16][A7]",
          "[A16][A7]") {
  C3AtBoth both;
  Scheduler& s = both.s;
  auto job = [](const char* project) {
    auto j = Job({"c3"}, false);
    j.set_project(project);
    return j;
  };
  s.BeginPass();
  auto x = s.Drain("job-x", job("px"), Slots(1)[0]);
  REQUIRE(x.ok());
  REQUIRE_FALSE(x->empty());
  const std::string other = *x == "east" ? "west" : "east";
  // Refused at the one center no other job drains: not drained there while x's could run it.
  auto w = s.Drain("job-w", job("pw"), {0, 0, 1, {other}, {other}});
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(w.status().message() ==
        "every center that could run it drains for another job or refused it less than 10 minutes ago");
  // Not refused: the other center drains for it; a fourth job finds none and is told why.
  auto v = s.Drain("job-v", job("pv"), Slots(1)[0]);
  REQUIRE(v.ok());
  CHECK(*v == other);
  auto u = s.Drain("job-u", job("pu"), Slots(1)[0]);
  REQUIRE_FALSE(u.ok());
  CHECK(u.status().message() == "every center that could run it drains for another job");
  s.EndPass();
}

TEST_CASE("a job refused at one center keeps only the centers it waits for, its breadth counted without the "
          "refusing one [A16][A7]",
          "[A16][A7]") {
  C3AtBoth both;
  Scheduler& s = both.s;
  // Refused at west, the 3-CPU job waits for east alone: east is kept for it as for a job only
  // east can run, so a 1-CPU job goes to west, which can start it now (counted with west, the
  // keep would be as broad as the 1-CPU job, which would take cheap east).
  s.BeginPass();
  auto x = s.Place("job-x", Job({"c3"}, false), {{0, 0, 1, {"west"}, {"west"}}}, {});
  REQUIRE(x.ok());
  CHECK_FALSE(x->placed);
  s.EndPass();
  auto small = s.Place("job-small", Job({"c1"}, false), Slots(1), {});
  REQUIRE(small.ok());
  REQUIRE(small->placed);
  CHECK(small->centers[0] == "west");
}

TEST_CASE("a task's replicas refused at different centers each keep what they wait for, whichever comes first "
          "[A16][A7]",
          "[A16][A7]") {
  TwoCenters source;
  source.c3_at = "east,west";
  source.west_free = 1;  // no 3-CPU replica starts anywhere now
  source.with_north = true;
  FakeClock clock;
  Scheduler s(&source, &clock, SchedulerOptions{});
  REQUIRE(s.Refresh().ok());
  // Two replicas of one task: the first holds no refusal (it waits for east or west), the
  // second was refused at west and waits for east alone: east is kept as for a job only
  // east can run.
  auto job = Job({"c3"}, false);
  job.mutable_tasks(0)->set_replica_number(2);
  s.BeginPass();
  auto two = s.Place("job-two", job, {{0, 1, 0, {}, {}}, {0, 0, 1, {"west"}, {"west"}}}, {});
  REQUIRE(two.ok());
  CHECK_FALSE(two->placed);
  s.EndPass();
  // A 1-CPU replica that could run at east or north leaves east to it and goes to north,
  // which can start it now (the keep worked out from the first replica alone would count
  // east as one of two, as broad as this one, and it would take cheap east).
  auto small = s.Place("job-small", Job({"c2"}, false), Slots(1), {});
  REQUIRE(small.ok());
  REQUIRE(small->placed);
  CHECK(small->centers[0] == "north");
}

TEST_CASE("a replica is never moved to a center that refused it [A16][A7]", "[A16][A7]") {
  C3AtBoth both;
  Scheduler& s = both.s;
  auto job = Job({"c3"}, false);
  // Pending at busy east for half an hour: idle west would finish it sooner...
  const Scheduler::MoveQuestion plain{"job-m", &job, {{0, 0, 3, {}}}, "east", absl::Minutes(30)};
  auto answers = s.MoveTargets({plain}, 0.05);
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].to == "west");
  // ...unless west refused it: then it keeps its place at east.
  const Scheduler::MoveQuestion refused{"job-m", &job, {{0, 0, 3, {}, {"west"}}}, "east", absl::Minutes(30)};
  answers = s.MoveTargets({refused}, 0.05);
  REQUIRE(answers.size() == 1);
  INFO(answers[0].why);
  CHECK(answers[0].to.empty());
  CHECK(answers[0].why.find("only a center that refused it can start it now") != std::string::npos);
}

}  // namespace
}  // namespace jc::scheduler
