// Hierarchical fair share in the executor's scheduler (SPEC B5), with a fake clock.

#include <catch2/catch.hpp>

#include "executor/policy/scheduler.h"
#include "tests/unit/executor/scheduler_cycle.h"

using namespace jc::nexec;

namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

Scheduler Cluster(int slots, std::vector<ShareNode> tree) {
  QueueConfig q;
  q.name = "normal";
  FairshareConfig f;
  f.tree = std::move(tree);
  f.half_life = absl::Hours(5);
  q.fairshare = f;
  Scheduler s = testing::OneHost(slots, q);
  s.AdvanceFairshare(kStart);
  return s;
}

// `n` one-slot jobs for each user, ids from `first`.
std::vector<JobRequest> Flood(int64_t first, int n, const std::vector<std::string>& users) {
  std::vector<JobRequest> out;
  for (int i = 0; i < n; ++i) {
    for (const auto& u : users) out.push_back(testing::MakeJob(first++, u, 1, "normal", ""));
  }
  return out;
}

std::map<std::string, int> SlotsByUser(const std::map<int64_t, Placement>& placed,
                                       const std::map<int64_t, std::string>& owner) {
  std::map<std::string, int> out;
  for (const auto& [id, p] : placed) out[owner.at(id)] += p.sections[0][0].slots;
  return out;
}

}  // namespace

TEST_CASE("fair share: one cycle already gives each user slots in proportion to the shares", "[B5]") {
  Scheduler s = Cluster(3, {{"alice", 2, {}}, {"bob", 1, {}}});
  auto jobs = Flood(1, 10, {"alice", "bob"});
  std::map<int64_t, std::string> owner;
  for (const auto& j : jobs) owner[j.id] = j.user;
  auto placed = testing::RunCycle(s, jobs);
  CHECK(SlotsByUser(placed, owner) == std::map<std::string, int>{{"alice", 2}, {"bob", 1}});
}

TEST_CASE("fair share is hierarchical: groups split by their shares, then their users by theirs", "[B5]") {
  Scheduler s = Cluster(8, {{"physics", 3, {{"alice", 1, {}}, {"bob", 1, {}}}}, {"chem", 1, {{"carol", 1, {}}}}});
  auto jobs = Flood(1, 10, {"alice", "bob", "carol"});
  std::map<int64_t, std::string> owner;
  for (const auto& j : jobs) owner[j.id] = j.user;
  auto placed = testing::RunCycle(s, jobs);
  CHECK(SlotsByUser(placed, owner) == std::map<std::string, int>{{"alice", 3}, {"bob", 3}, {"carol", 2}});
  auto report = s.FairshareReport("normal");
  REQUIRE(report.size() == 5);
  CHECK(report[0].path == "physics");
  CHECK(report[0].share_fraction == Approx(0.75));
  CHECK(report[0].running == 6);
  CHECK(report[1].path == "physics/alice");
  CHECK(report[1].share_fraction == Approx(0.375));
}

TEST_CASE("fair share lends idle shares and takes them back when their owner submits", "[B5]") {
  Scheduler s = Cluster(4, {{"alice", 3, {}}, {"bob", 1, {}}});
  auto bobs = Flood(1, 8, {"bob"});
  auto first = testing::RunCycle(s, bobs);
  CHECK(first.size() == 4);  // alice is idle: bob gets every slot
  // bob's jobs end; alice now waits beside bob's remaining ones and goes first.
  s.AdvanceFairshare(kStart + absl::Hours(1));
  for (const auto& [id, p] : first) REQUIRE(s.Release(id).ok());
  auto alices = Flood(100, 8, {"alice"});
  std::map<int64_t, std::string> owner;
  for (const auto& j : bobs) owner[j.id] = j.user;
  for (const auto& j : alices) owner[j.id] = j.user;
  auto second = testing::RunCycle(s, alices);
  CHECK(SlotsByUser(second, owner).at("alice") >= 3);
}

TEST_CASE("fair share converges to the shares over a simulated day, and an unlisted user gets default's shares",
          "[B5]") {
  Scheduler s = Cluster(4, {{"alice", 3, {}}, {"bob", 1, {}}, {"default", 1, {}}});
  std::map<int64_t, std::string> owner;
  std::map<std::string, double> slot_hours;
  int64_t next = 1;
  std::vector<int64_t> running;
  for (int hour = 0; hour < 24; ++hour) {
    s.AdvanceFairshare(kStart + absl::Hours(hour));
    for (int64_t id : running) REQUIRE(s.Release(id).ok());  // one-hour jobs
    running.clear();
    // Everyone keeps work waiting; carol is in no tree node: she counts as "default".
    std::vector<JobRequest> more = Flood(next, 4, {"alice", "bob", "carol"});
    next += static_cast<int64_t>(more.size());
    for (const auto& j : more) owner[j.id] = j.user;
    for (const auto& [id, p] : testing::RunCycle(s, more)) {
      running.push_back(id);
      slot_hours[owner.at(id)] += 1;
    }
  }
  INFO("alice " << slot_hours["alice"] << ", bob " << slot_hours["bob"] << ", carol " << slot_hours["carol"]);
  // 3 : 1 : 1 of 96 slot-hours is 57.6 : 19.2 : 19.2.
  CHECK(slot_hours["alice"] == Approx(57.6).margin(6));
  CHECK(slot_hours["bob"] == Approx(19.2).margin(4));
  CHECK(slot_hours["carol"] == Approx(19.2).margin(4));
  auto report = s.FairshareReport("normal");
  bool carol_listed = false;
  for (const auto& r : report) carol_listed |= r.path == "carol" && r.shares == 1;
  CHECK(carol_listed);
}

TEST_CASE("fair share keeps its pending jobs between cycles: a cancelled job is gone, a reload keeps the rest",
          "[B5]") {
  Scheduler s = Cluster(2, {{"alice", 1, {}}, {"bob", 1, {}}});
  // alice: 1, 2; bob: 3, 4 (submitted in that order).
  for (const auto& j : {testing::MakeJob(1, "alice", 1, "normal", ""), testing::MakeJob(2, "alice", 1, "normal", ""),
                        testing::MakeJob(3, "bob", 1, "normal", ""), testing::MakeJob(4, "bob", 1, "normal", "")}) {
    REQUIRE(s.Submit(j).ok());
  }
  REQUIRE(s.Cancel(1).ok());
  std::set<int64_t> placed;
  for (const auto& p : s.Cycle()) placed.insert(p.job_id);
  CHECK(placed == std::set<int64_t>{2, 3});  // alice's oldest left, and bob's oldest
  // A reload rebuilds the tree; the job still waiting stays in it.
  QueueConfig q;
  q.name = "normal";
  FairshareConfig f;
  f.tree = {{"alice", 1, {}}, {"bob", 2, {}}};
  q.fairshare = f;
  REQUIRE(s.UpdateQueue(q).ok());
  REQUIRE(s.Release(2).ok());
  placed.clear();
  for (const auto& p : s.Cycle()) placed.insert(p.job_id);
  CHECK(placed == std::set<int64_t>{4});
  CHECK(s.pending() == 0);
  CHECK(s.Cycle().empty());
}

TEST_CASE("fair-share usage computed from a job's record equals what the tree counted while it ran", "[B5]") {
  FairshareConfig f;
  f.tree = {{"alice", 1, {}}, {"bob", 1, {}}};
  f.half_life = absl::Hours(2);
  f.gpu_factor = 4;
  f.cpu_time_factor = 0.5;
  // Alice ran 3 slots and 1 GPU for 5 hours, then nothing for 3 hours; she used 10 CPU
  // hours, counted as her heartbeats reported them (at the end here).
  FairshareTree live(f);
  const int steps = 5 * 600;
  for (int i = 0; i < steps; ++i) live.Advance(absl::Seconds(6), {{"alice", {3, 1}}});
  live.AddCpuTime("alice", 10 * 3600);
  live.Advance(absl::Hours(3), {});
  const absl::Time start = kStart, end = kStart + absl::Hours(5), now = end + absl::Hours(3);
  FairshareTree rebuilt(f);
  rebuilt.AddPast("alice", 3, 1, 10 * 3600, start, end, now);
  REQUIRE(live.usage().count("alice"));
  REQUIRE(rebuilt.usage().count("alice"));
  const double counted = live.usage().at("alice"), computed = rebuilt.usage().at("alice");
  INFO("counted " << counted << ", computed " << computed);
  // 7 slot-equivalents for 5 hours with a 2 h half-life: about 16 slot-hours left
  // before the last 3 hours' decay, plus 5 from CPU time.
  CHECK(counted > 5);
  CHECK(std::abs(counted - computed) < 0.01 * counted);
  // A job that ended long ago counts for (almost) nothing; one still running up to now
  // counts fully at its end.
  FairshareTree old(f);
  old.AddPast("bob", 8, 0, 0, kStart - absl::Hours(100), kStart - absl::Hours(99), kStart);
  CHECK(old.usage().at("bob") < 1e-6);
}

// ---- Dominant Resource Fairness (the scheduling course's DRF) ----

namespace {

Scheduler DrfCluster(DrfBy by, std::vector<HostConfig> hosts) {
  Scheduler s;
  for (auto& h : hosts) REQUIRE(s.AddHost(h).ok());
  QueueConfig q;
  q.name = "normal";
  q.drf = by;
  REQUIRE(s.AddQueue(q).ok());
  return s;
}

HostConfig DrfHost(const std::string& name, int slots, double mem_mb, int gpus) {
  HostConfig h;
  h.name = name;
  h.slots = slots;
  h.mem_mb = mem_mb;
  for (int g = 0; g < gpus; ++g) h.gpus.push_back(g);
  return h;
}

}  // namespace

TEST_CASE("DRF per job: the course's example, job 1 (memory share 0.4) before job 2 (GPU share 0.5)", "[B5]") {
  // Cluster resources: 10 GPUs, 20 GB (two hosts of 5 GPUs and 10 GB).
  Scheduler s = DrfCluster(DrfBy::kJob, {DrfHost("g1", 8, 10240, 5), DrfHost("g2", 8, 10240, 5)});
  // Job 2 is submitted first: 2 + 3 GPUs, 2 + 2 GB.
  JobRequest job2 = testing::MakeJob(2, "bob", 2, "normal", "1{rusage[gpu=2:mem=2048]} 1{rusage[gpu=3:mem=2048]}");
  // Job 1: 1 + 1 GPUs, 4 + 4 GB.
  JobRequest job1 = testing::MakeJob(1, "alice", 2, "normal", "rusage[gpu=1:mem=4096]");
  REQUIRE(s.Submit(job2).ok());
  REQUIRE(s.Submit(job1).ok());
  DominantShare d1 = s.JobDominantShare(1), d2 = s.JobDominantShare(2);
  CHECK(d1.share == Approx(0.4));
  CHECK(std::string(d1.resource) == "mem");
  CHECK(d2.share == Approx(0.5));
  CHECK(std::string(d2.resource) == "gpu");
  std::vector<Placement> placed = s.Cycle();
  REQUIRE(placed.size() == 2);
  CHECK(placed[0].job_id == 1);  // job 1 has higher priority: 0.4 < 0.5
  CHECK(placed[1].job_id == 2);
}

TEST_CASE("DRF per user is max-min fair over CPUs and memory (the DRF paper's 9 CPU / 18 GB example)", "[B5]") {
  // User A's tasks need <1 CPU, 4 GB>, user B's <3 CPUs, 1 GB>. B submitted everything
  // first, so FCFS would give B all 9 CPUs; DRF equalises the dominant shares: A gets 3
  // tasks (12 of 18 GB = 2/3), B gets 2 (6 of 9 CPUs = 2/3).
  Scheduler s = DrfCluster(DrfBy::kUser, {DrfHost("h1", 9, 18432, 0)});
  std::vector<JobRequest> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(testing::MakeJob(10 + i, "b", 3, "normal", "rusage[mem=341]"));
  for (int i = 0; i < 5; ++i) jobs.push_back(testing::MakeJob(20 + i, "a", 1, "normal", "rusage[mem=4096]"));
  auto placed = testing::RunCycle(s, jobs);
  int a = 0, b = 0;
  for (const auto& [id, p] : placed) (id >= 20 ? a : b) += 1;
  CHECK(a == 3);
  CHECK(b == 2);

  SECTION("without DRF the same submissions go FCFS and starve A") {
    Scheduler fcfs = DrfCluster(DrfBy::kOff, {DrfHost("h1", 9, 18432, 0)});
    auto fcfs_placed = testing::RunCycle(fcfs, jobs);
    int fa = 0;
    for (const auto& [id, p] : fcfs_placed) fa += id >= 20;
    CHECK(fa == 0);
  }
}

TEST_CASE("DRF per group counts what a group's users hold together", "[B5]") {
  Scheduler s = DrfCluster(DrfBy::kGroup, {DrfHost("g1", 16, 65536, 8)});
  s.DefineUserGroup("vision", {"v1", "v2"});
  s.DefineUserGroup("nlp", {"n1"});
  // vision already runs 4 GPUs (two users, two GPUs each); nlp nothing.
  auto first = testing::RunCycle(s, {testing::MakeJob(1, "v1", 2, "normal", "rusage[gpu=1]"),
                                     testing::MakeJob(2, "v2", 2, "normal", "rusage[gpu=1]")});
  REQUIRE(first.size() == 2);
  // Now 4 GPUs are left: vision asks first, nlp after; nlp's lower share goes first and
  // takes 2, then vision and nlp alternate by share: nlp 2 more (share 4/8 = vision's).
  std::vector<JobRequest> more;
  for (int i = 0; i < 3; ++i) more.push_back(testing::MakeJob(10 + i, i % 2 ? "v2" : "v1", 2, "normal", "rusage[gpu=1]"));
  for (int i = 0; i < 3; ++i) more.push_back(testing::MakeJob(20 + i, "n1", 2, "normal", "rusage[gpu=1]"));
  auto placed = testing::RunCycle(s, more);
  int nlp = 0;
  for (const auto& [id, p] : placed) nlp += id >= 20;
  CHECK(placed.size() == 2);
  CHECK(nlp == 2);
}

TEST_CASE("fair-share preemption takes a user over its share back to it, and no further", "[B5]") {
  QueueConfig q;
  q.name = "normal";
  FairshareConfig f;
  f.tree = {{"alice", 1, {}}, {"bob", 1, {}}};
  f.preemptive = true;
  q.fairshare = f;
  Scheduler s = testing::OneHost(4, q);
  s.AdvanceFairshare(kStart);
  // alice is idle: bob takes all 4 slots.
  CHECK(testing::RunCycle(s, Flood(1, 4, {"bob"})).size() == 4);
  // alice's first job: her branch with it (1 / (1 + 1)) is above bob's (1 / (1 + 4)):
  // bob's youngest job is suspended for it.
  CHECK(testing::RunCycle(s, {testing::MakeJob(5, "alice", 1, "normal", "")}).empty());
  auto p = s.TakePreemptions();
  REQUIRE(p.size() == 1);
  CHECK(p[0].victim == 4);
  CHECK(p[0].reason == "preempted by job 5 (fair share of queue normal)");
  auto started = s.Cycle();
  REQUIRE(started.size() == 1);
  CHECK(started[0].job_id == 5);
  // Her second: 1/3 against bob's 1/4 — one more.
  CHECK(testing::RunCycle(s, {testing::MakeJob(6, "alice", 1, "normal", "")}).empty());
  p = s.TakePreemptions();
  REQUIRE(p.size() == 1);
  CHECK(p[0].victim == 3);
  CHECK(s.Cycle().size() == 1);
  // 2 : 2 is their shares: a third (1/4 against bob's 1/3) preempts nothing, and bob
  // could not preempt back either.
  CHECK(testing::RunCycle(s, {testing::MakeJob(7, "alice", 1, "normal", "")}).empty());
  CHECK(s.TakePreemptions().empty());
  CHECK(testing::RunCycle(s, {testing::MakeJob(8, "bob", 1, "normal", "")}).empty());
  CHECK(s.TakePreemptions().empty());

  // Without preempt: alice waits.
  f.preemptive = false;
  q.fairshare = f;
  Scheduler t = testing::OneHost(4, q);
  t.AdvanceFairshare(kStart);
  CHECK(testing::RunCycle(t, Flood(1, 4, {"bob"})).size() == 4);
  CHECK(testing::RunCycle(t, {testing::MakeJob(5, "alice", 1, "normal", "")}).empty());
  CHECK(t.TakePreemptions().empty());
}
