// Capacity scheduling in the executor's scheduler (the course's virtual clusters, SPEC
// B5): guarantees, bonus capacity up to a max, the user limit factor, and a group under
// its guarantee reclaiming by preemption what others borrowed. Golden scenarios with a
// fake clock.

#include <catch2/catch.hpp>

#include <algorithm>

#include "executor/policy/capacity.h"
#include "executor/policy/scheduler.h"
#include "tests/unit/executor/scheduler_cycle.h"

using namespace jc::nexec;

namespace {

// One host of 16 slots and 8 GPUs; queue `shared` split into clusters vision (alice,
// carol) and nlp (bob), each guaranteed 4 GPUs and allowed up to `max`.
Scheduler GpuClusters(double max = 8, double user_limit_factor = 0) {
  Scheduler s;
  HostConfig h;
  h.name = "h1";
  h.slots = 16;
  h.mem_mb = 65536;
  h.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  REQUIRE(s.AddHost(h).ok());
  s.DefineUserGroup("vision", {"alice", "carol"});
  s.DefineUserGroup("nlp", {"bob"});
  QueueConfig q;
  q.name = "shared";
  CapacityConfig c;
  c.resource = CapacityResource::kGpus;
  c.user_limit_factor = user_limit_factor;
  c.clusters = {{"vision", 4, max}, {"nlp", 4, max}};
  q.capacity = c;
  REQUIRE(s.AddQueue(q).ok());
  return s;
}

JobRequest GpuJob(int64_t id, const std::string& user, int gpus) {
  return testing::MakeJob(id, user, 1, "shared", absl::StrCat("rusage[gpu=", gpus, "]"));
}

double Held(const Scheduler& s, const std::string& cluster) {
  for (const auto& r : s.CapacityReport("shared")) {
    if (r.config.name == cluster) return r.held;
  }
  FAIL("no cluster " << cluster);
  return -1;
}

}  // namespace

TEST_CASE("a group under its guarantee reclaims borrowed GPUs by preemption, and no further", "[B5]") {
  Scheduler s = GpuClusters();
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  s.SetNow(now);
  // vision is idle: nlp borrows its 4 GPUs (bonus capacity) and holds all 8.
  auto first = testing::RunCycle(s, {GpuJob(1, "bob", 2), GpuJob(2, "bob", 2), GpuJob(3, "bob", 2), GpuJob(4, "bob", 2)});
  CHECK(first.size() == 4);
  CHECK(Held(s, "nlp") == 8);

  // alice needs 2 of vision's guarantee: the youngest of nlp's borrowed jobs is requeued.
  s.SetNow(now += absl::Minutes(10));
  CHECK(testing::RunCycle(s, {GpuJob(5, "alice", 2)}).empty());
  auto preemptions = s.TakePreemptions();
  REQUIRE(preemptions.size() == 1);
  CHECK(preemptions[0].victim == 4);
  CHECK(preemptions[0].preemptor == 5);
  CHECK(preemptions[0].requeue);  // it holds GPUs
  CHECK(preemptions[0].reason == "preempted by job 5 (virtual cluster vision reclaims its guarantee)");
  CHECK(s.PendingReason(5) == "preempting job 4");

  // Until the victim has ended, alice's job waits and takes nothing more.
  s.SetNow(now += absl::Seconds(5));
  CHECK(s.Cycle().empty());
  CHECK(s.TakePreemptions().empty());
  CHECK(s.PendingReason(5) == "waiting for preempted job 4 to end");

  // The victim ends and is requeued (as the master does): alice's job starts before it.
  s.SetNow(now += absl::Seconds(30));
  REQUIRE(s.Release(4).ok());
  auto second = testing::RunCycle(s, {GpuJob(4, "bob", 2)});
  REQUIRE(second.size() == 1);
  CHECK(second.count(5) == 1);
  CHECK(Held(s, "vision") == 2);
  CHECK(Held(s, "nlp") == 6);

  // carol, in vision too, takes the rest of the guarantee back from job 3.
  CHECK(testing::RunCycle(s, {GpuJob(6, "carol", 2)}).empty());
  auto again = s.TakePreemptions();
  REQUIRE(again.size() == 1);
  CHECK(again[0].victim == 3);
  REQUIRE(s.Release(3).ok());
  REQUIRE(s.Submit(GpuJob(3, "bob", 2)).ok());
  auto third = s.Cycle();
  REQUIRE(third.size() == 1);
  CHECK(third[0].job_id == 6);
  CHECK(Held(s, "vision") == 4);
  CHECK(Held(s, "nlp") == 4);

  // vision now holds its guarantee: a third job of it is not owed anything and waits;
  // nlp keeps its own guarantee.
  CHECK(testing::RunCycle(s, {GpuJob(7, "alice", 2)}).empty());
  CHECK(s.TakePreemptions().empty());
  CHECK(Held(s, "nlp") == 4);

  // When two of nlp's jobs end, nlp is under its guarantee again: its requeued jobs take
  // the freed GPUs before vision's job beyond its guarantee.
  REQUIRE(s.Release(1).ok());
  REQUIRE(s.Release(2).ok());
  auto fourth = s.Cycle();
  std::vector<int64_t> ids;
  for (const auto& p : fourth) ids.push_back(p.job_id);
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<int64_t>{3, 4});
  CHECK(Held(s, "nlp") == 4);
}

TEST_CASE("reclaim never takes a group below its own guarantee", "[B5]") {
  Scheduler s = GpuClusters();
  // nlp holds 6: one 4-GPU job and one 2-GPU job; vision holds 2.
  auto first = testing::RunCycle(s, {GpuJob(1, "bob", 4), GpuJob(2, "alice", 2), GpuJob(3, "bob", 2)});
  CHECK(first.size() == 3);
  // alice asks 2 more (within vision's guarantee): only the 2-GPU job may go (taking the
  // 4-GPU one would leave nlp at 2, under its guarantee).
  CHECK(testing::RunCycle(s, {GpuJob(4, "alice", 2)}).empty());
  auto p = s.TakePreemptions();
  REQUIRE(p.size() == 1);
  CHECK(p[0].victim == 3);

  // A job bigger than what is left of the guarantee is not owed: it waits, preempting nothing.
  Scheduler t = GpuClusters();
  CHECK(testing::RunCycle(t, {GpuJob(1, "bob", 4), GpuJob(2, "bob", 4)}).size() == 2);
  CHECK(testing::RunCycle(t, {GpuJob(3, "alice", 6)}).empty());
  CHECK(t.TakePreemptions().empty());
}

TEST_CASE("bonus capacity stops at a group's max, and the user limit factor caps one user", "[B5]") {
  Scheduler s = GpuClusters(/*max=*/6);
  auto placed = testing::RunCycle(s, {GpuJob(1, "bob", 2), GpuJob(2, "bob", 2), GpuJob(3, "bob", 2), GpuJob(4, "bob", 2)});
  CHECK(placed.size() == 3);  // 6 of the 8 GPUs; two stay idle rather than pass the max
  CHECK(s.PendingReason(4) == "virtual cluster nlp: max 6 gpu (6 held, 2 asked)");

  Scheduler u = GpuClusters(8, /*user_limit_factor=*/0.5);  // a user of vision: 2 GPUs
  auto one_each = testing::RunCycle(u, {GpuJob(1, "alice", 2), GpuJob(2, "alice", 2), GpuJob(3, "carol", 2)});
  CHECK(one_each.size() == 2);
  CHECK(one_each.count(2) == 0);
  CHECK(u.PendingReason(2) == "virtual cluster vision: user limit 2 gpu (alice holds 2, 2 asked)");

  // What can never fit is refused at submission.
  JobRequest too_big = GpuJob(9, "bob", 7);
  auto st = s.Submit(too_big);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(st.message()) == "the job asks for 7 gpu; virtual cluster nlp may hold at most 6");
  auto over_user = u.Submit(GpuJob(10, "alice", 3));
  CHECK(std::string(over_user.message()).find("a user of virtual cluster vision may hold at most 2") != std::string::npos);
  auto stranger = s.Submit(GpuJob(11, "dave", 1));
  CHECK(std::string(stranger.message()) == "user dave is in no virtual cluster of queue shared (and it has none named default)");
}

TEST_CASE("idle capacity beyond the guarantees is split in proportion to them", "[B5]") {
  // Slots: A is guaranteed 3, B 1, on 8 slots; both have more waiting than fits.
  QueueConfig q;
  q.name = "shared";
  q.capacity = CapacityConfig{CapacityResource::kSlots, 0, {{"A", 3, 0}, {"B", 1, 0}}};
  Scheduler s = testing::OneHost(8, q);
  s.DefineUserGroup("A", {"alice"});
  s.DefineUserGroup("B", {"bob"});
  std::vector<JobRequest> jobs;
  for (int i = 1; i <= 10; ++i) jobs.push_back(testing::MakeJob(i, "bob", 1, "shared", ""));  // B first in time
  for (int i = 11; i <= 20; ++i) jobs.push_back(testing::MakeJob(i, "alice", 1, "shared", ""));
  auto placed = testing::RunCycle(s, jobs);
  REQUIRE(placed.size() == 8);
  CHECK(Held(s, "A") == 6);
  CHECK(Held(s, "B") == 2);
}

TEST_CASE("slot guarantees reclaim by suspending CPU jobs, resumed when the slots are free again", "[B5]") {
  QueueConfig q;
  q.name = "shared";
  q.capacity = CapacityConfig{CapacityResource::kSlots, 0, {{"A", 2, 0}, {"default", 2, 0}}};
  Scheduler s = testing::OneHost(4, q);
  s.DefineUserGroup("A", {"alice"});
  // bob (in default) borrows all 4 slots.
  auto first = testing::RunCycle(s, {testing::MakeJob(1, "bob", 2, "shared", ""), testing::MakeJob(2, "bob", 2, "shared", "")});
  CHECK(first.size() == 2);
  CHECK(testing::RunCycle(s, {testing::MakeJob(3, "alice", 2, "shared", "")}).empty());
  auto p = s.TakePreemptions();
  REQUIRE(p.size() == 1);
  CHECK(p[0].victim == 2);
  CHECK_FALSE(p[0].requeue);  // no GPUs: suspended, its slots lent
  CHECK(Held(s, "default") == 2);
  auto next = s.Cycle();
  REQUIRE(next.size() == 1);
  CHECK(next[0].job_id == 3);
  REQUIRE(s.Release(3).ok());
  s.Cycle();
  CHECK(s.TakeResumes() == std::vector<int64_t>{2});
  CHECK(Held(s, "default") == 4);
}

TEST_CASE("the capacity order serves the cluster furthest under its guarantee first", "[B5]") {
  std::vector<VirtualClusterConfig> clusters = {{"a", 4, 0}, {"b", 2, 0}, {"free", 0, 0}};
  // a holds 3 of 4 (0.75), b 0 of 2, free (no guarantee) nothing.
  std::vector<CapacityJob> pending = {{1, 2, 1}, {2, 0, 1}, {3, 1, 1}, {4, 1, 1}, {5, 0, 1}};
  auto order = CapacityOrder(pending, clusters, {3, 0, 0});
  std::vector<int64_t> ids;
  std::vector<bool> owed;
  for (const auto& p : order) {
    ids.push_back(p.id);
    owed.push_back(p.within_guarantee);
  }
  // b (0/2) -> 3; b (1/2 = 0.5) -> 4; a (0.75) -> 2 (owed: 3+1 <= 4); then a at 1.0 and
  // b at 1.0 are beyond: a first by index -> 5 (not owed); free last -> 1.
  CHECK(ids == std::vector<int64_t>{3, 4, 2, 5, 1});
  CHECK(owed == std::vector<bool>{true, true, true, false, false});
}

TEST_CASE("a reload that changes the virtual clusters counts what each holds again", "[B5]") {
  Scheduler s = GpuClusters();
  CHECK(testing::RunCycle(s, {GpuJob(1, "bob", 2), GpuJob(2, "alice", 2), GpuJob(3, "carol", 2)}).size() == 3);
  CHECK(Held(s, "vision") == 4);
  CHECK(Held(s, "nlp") == 2);
  // carol moves to a cluster of her own; nlp's max drops to 2.
  s.DefineUserGroup("carol-team", {"carol"});
  s.DefineUserGroup("vision", {"alice"});
  QueueConfig q;
  q.name = "shared";
  q.capacity = CapacityConfig{CapacityResource::kGpus, 0, {{"vision", 4, 8}, {"nlp", 2, 2}, {"carol-team", 2, 0}}};
  REQUIRE(s.UpdateQueue(q).ok());
  CHECK(Held(s, "vision") == 2);
  CHECK(Held(s, "nlp") == 2);
  CHECK(Held(s, "carol-team") == 2);
  CHECK(testing::RunCycle(s, {GpuJob(4, "bob", 2)}).empty());
  CHECK(s.PendingReason(4) == "virtual cluster nlp: max 2 gpu (2 held, 2 asked)");
  // Releases after the reload give back to the clusters they are counted in now.
  REQUIRE(s.Release(3).ok());
  CHECK(Held(s, "carol-team") == 0);
}
