// Hierarchical fair share in the executor's scheduler (SPEC B5), with a fake clock.

#include <catch2/catch.hpp>

#include "executor/policy/scheduler.h"
#include "tests/unit/executor/scheduler_cycle.h"

using namespace jc::nexec;

namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

Scheduler Cluster(int slots, std::vector<ShareNode> tree) {
  Scheduler s;
  HostConfig h;
  h.name = "h1";
  h.slots = slots;
  h.mem_mb = 65536;
  REQUIRE(s.AddHost(h).ok());
  QueueConfig q;
  q.name = "normal";
  FairshareConfig f;
  f.tree = std::move(tree);
  f.half_life = absl::Hours(5);
  q.fairshare = f;
  REQUIRE(s.AddQueue(q).ok());
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
