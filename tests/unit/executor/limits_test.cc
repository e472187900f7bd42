// Resource limits in the executor's scheduler (SPEC B7), with the SkyForm seeds' own
// examples: consumers with exclusions, per_ forms, resources, and time windows.

#include <catch2/catch.hpp>

#include "executor/policy/limits.h"
#include "executor/policy/scheduler.h"
#include "tests/unit/executor/scheduler_cycle.h"

using namespace jc::nexec;

namespace {

const absl::TimeZone kUtc = absl::UTCTimeZone();

// 2026-11-23 is a Monday.
absl::Time At(int day, int hour, int minute) {
  return absl::FromCivil(absl::CivilMinute(2026, 11, day, hour, minute), kUtc);
}

Scheduler Cluster(int hosts, int slots, const std::vector<std::string>& queues = {"normal"}) {
  Scheduler s;
  for (int i = 1; i <= hosts; ++i) {
    HostConfig c;
    c.name = "h" + std::to_string(i);
    c.slots = slots;
    c.mem_mb = 65536;
    c.gpus = {0, 1, 2, 3};
    REQUIRE(s.AddHost(c).ok());
  }
  for (const auto& name : queues) {
    QueueConfig q;
    q.name = name;
    REQUIRE(s.AddQueue(q).ok());
  }
  return s;
}

JobRequest Job(int64_t id, const std::string& user, int slots, const std::string& queue = "normal",
               const std::string& requirement = "") {
  return testing::MakeJob(id, user, slots, queue, requirement);
}

std::map<int64_t, Placement> Run(Scheduler& s, const std::vector<JobRequest>& jobs) {
  return testing::RunCycle(s, jobs);
}

LimitConfig Limit(const std::string& name) {
  LimitConfig l;
  l.name = name;
  return l;
}

}  // namespace

TEST_CASE("limit values: numbers, windowed values, resources, consumers", "[B7]") {
  auto plain = ParseLimitValue("130");
  REQUIRE(plain.ok());
  CHECK(plain->At(At(24, 12, 0), kUtc) == 130.0);
  auto windowed = ParseLimitValue("[2 1:8:0-5:18:0] [5 5:18:01-1:7:59]");
  REQUIRE(windowed.ok());
  CHECK(windowed->At(At(24, 12, 0), kUtc) == 2.0);   // Tuesday noon
  CHECK(windowed->At(At(28, 12, 0), kUtc) == 5.0);   // Saturday
  auto office = ParseLimitValue("[4 9:00-18:00]");
  REQUIRE(office.ok());
  CHECK_FALSE(office->At(At(24, 20, 0), kUtc).has_value());  // outside every window: no limit

  auto resources = ParseLimitResources("[mem,500000 1:8:0-5:18:0] [gpu,5 9:00-18:00]");
  REQUIRE(resources.ok());
  CHECK(resources->at("mem").At(At(24, 12, 0), kUtc) == 500000.0);
  CHECK(resources->at("gpu").At(At(24, 12, 0), kUtc) == 5.0);
  CHECK_FALSE(resources->at("gpu").At(At(24, 19, 0), kUtc).has_value());

  ConsumerSet users = ParseConsumers("all ~u001", false);
  CHECK(users.all);
  CHECK(users.excluded == std::set<std::string>{"u001"});

  for (const char* bad : {"lots", "-1", "[2 1:8:0-18:00]", "[2", "2 3"}) {
    CAPTURE(bad);
    CHECK_FALSE(ParseLimitValue(bad).ok());
  }
  for (const char* bad : {"mem,5000", "[mem]", "[mem,x]", "[,5]"}) {
    CAPTURE(bad);
    CHECK_FALSE(ParseLimitResources(bad).ok());
  }
}

TEST_CASE("a limit over queues and users with an exclusion holds their slots together, and names itself", "[B7]") {
  // The seeds' limit1: queues medium and low, every user but u001, 130 slots (here 4).
  Scheduler s = Cluster(2, 8, {"medium", "low"});
  LimitConfig l = Limit("limit1");
  l.queues = ParseConsumers("medium low", false);
  l.users = ParseConsumers("all ~u001", false);
  l.slots = *ParseLimitValue("4");
  s.SetLimits({l});
  s.SetLimitTime(At(24, 12, 0), kUtc);
  // (Queues of equal priority go in name order: low, then medium.)
  auto placed = Run(s, {Job(1, "alice", 3, "low"), Job(2, "bob", 2, "medium"), Job(3, "u001", 6, "low"),
                        Job(4, "carol", 1, "low")});
  CHECK(placed.count(1));
  CHECK_FALSE(placed.count(2));  // 3 + 2 > 4
  CHECK(placed.count(3));        // u001 is not counted
  CHECK(placed.count(4));        // 3 + 1 = 4
  CHECK(s.PendingReason(2) == "limit limit1: slots 4 (4 used, 2 asked)");
  auto report = s.Limits();
  REQUIRE(report.size() == 1);
  CHECK(report[0].buckets.at({}).slots == 4);
  CHECK(report[0].buckets.at({}).jobs == 2);
  REQUIRE(s.Release(1).ok());
  CHECK(Run(s, {}).count(2));
  CHECK(s.PendingReason(2).empty());
}

TEST_CASE("per_queue and per_host: each queue runs at most two jobs on each host, so a third goes elsewhere",
          "[B7]") {
  // The seeds' limit2.
  Scheduler s = Cluster(2, 8, {"medium", "low"});
  LimitConfig l = Limit("limit2");
  l.queues = ParseConsumers("medium low", true);
  l.hosts = ParseConsumers("all", true);
  l.jobs = *ParseLimitValue("2");
  s.SetLimits({l});
  s.SetLimitTime(At(24, 12, 0), kUtc);
  auto placed = Run(s, {Job(1, "a", 1, "medium"), Job(2, "a", 1, "medium"), Job(3, "a", 1, "medium"),
                        Job(4, "a", 1, "low"), Job(5, "a", 1, "medium"), Job(6, "a", 1, "medium")});
  std::map<std::string, int> medium_per_host;
  for (int64_t id : {1, 2, 3, 5, 6}) {
    if (placed.count(id)) medium_per_host[placed[id].sections[0][0].host]++;
  }
  CHECK(medium_per_host == std::map<std::string, int>{{"h1", 2}, {"h2", 2}});  // packing steered by the limit
  CHECK(placed.count(4));  // low's own buckets
  CHECK(placed.size() == 5);
  auto report = s.Limits();
  CHECK(report[0].buckets.at({"medium", "h1"}).jobs == 2);
}

TEST_CASE("per_user resources: each user's memory and GPUs are limited apart", "[B7]") {
  // The seeds' limit3: per_user all, [mem,5000] [gpu,2].
  Scheduler s = Cluster(1, 16);
  LimitConfig l = Limit("limit3");
  l.users = ParseConsumers("all", true);
  l.resources = *ParseLimitResources("[mem,5000] [gpu, 2]");
  s.SetLimits({l});
  s.SetLimitTime(At(24, 12, 0), kUtc);
  auto placed = Run(s, {Job(1, "alice", 1, "normal", "rusage[mem=3000,gpu=1]"),
                        Job(2, "alice", 1, "normal", "rusage[mem=3000]"),
                        Job(3, "alice", 1, "normal", "rusage[gpu=1]"),
                        Job(4, "alice", 1, "normal", "rusage[gpu=1]"),
                        Job(5, "bob", 1, "normal", "rusage[mem=5000,gpu=2]")});
  CHECK(placed.count(1));
  CHECK_FALSE(placed.count(2));  // 6000 MB > 5000
  CHECK(s.PendingReason(2) == "limit limit3: mem 5000 for alice (3000 used, 3000 asked)");
  CHECK(placed.count(3));
  CHECK_FALSE(placed.count(4));  // a third GPU
  CHECK(placed.count(5));        // bob's own bucket
}

TEST_CASE("a limit with time windows switches with the clock: fewer slots on weekdays, more at the weekend",
          "[B7]") {
  Scheduler s = Cluster(1, 16);
  LimitConfig l = Limit("weekday");
  l.users = ParseConsumers("all", true);
  l.slots = *ParseLimitValue("[2 1:8:0-5:18:0] [5 5:18:01-1:7:59]");
  s.SetLimits({l});
  s.SetLimitTime(At(24, 12, 0), kUtc);  // Tuesday
  auto weekday = Run(s, {Job(1, "u", 2), Job(2, "u", 3)});
  CHECK(weekday.count(1));
  CHECK_FALSE(weekday.count(2));
  CHECK(s.PendingReason(2) == "limit weekday: slots 2 for u (2 used, 3 asked)");
  s.SetLimitTime(At(28, 10, 0), kUtc);  // Saturday: 5
  CHECK(Run(s, {}).count(2));
  s.SetLimitTime(At(30, 8, 0), kUtc);  // Monday 8:00: 2 again; running jobs stay, new ones wait
  CHECK(Run(s, {Job(3, "u", 1)}).empty());
  CHECK(s.PendingReason(3) == "limit weekday: slots 2 for u (5 used, 1 asked)");
}

TEST_CASE("a user group in a limit: one bucket for its members together, or one each with per_user", "[B7]") {
  Scheduler s = Cluster(1, 16);
  s.DefineUserGroup("ml", {"alice", "bob"});
  LimitConfig together = Limit("ml-total");
  together.users = ParseConsumers("ml", false);
  together.slots = *ParseLimitValue("3");
  LimitConfig each = Limit("ml-each");
  each.users = ParseConsumers("ml", true);
  each.slots = *ParseLimitValue("2");
  s.SetLimits({together, each});
  s.SetLimitTime(At(24, 12, 0), kUtc);
  auto placed = Run(s, {Job(1, "alice", 2), Job(2, "alice", 1), Job(3, "bob", 1), Job(4, "bob", 1),
                        Job(5, "carol", 8)});
  CHECK(placed.count(1));
  CHECK_FALSE(placed.count(2));  // alice's own 2
  CHECK(placed.count(3));        // 2 + 1 = 3 for ml
  CHECK_FALSE(placed.count(4));  // ml's 3
  CHECK(s.PendingReason(4) == "limit ml-total: slots 3 (3 used, 1 asked)");
  CHECK(placed.count(5));        // not in ml
}

TEST_CASE("a project limit counts jobs by -P, and limits are recounted when replaced", "[B7]") {
  Scheduler s = Cluster(1, 16);
  LimitConfig l = Limit("p1-jobs");
  l.projects = ParseConsumers("p1", false);
  l.jobs = *ParseLimitValue("1");
  s.SetLimits({l});
  s.SetLimitTime(At(24, 12, 0), kUtc);
  JobRequest a = Job(1, "u", 1), b = Job(2, "u", 1), c = Job(3, "u", 1);
  a.project = b.project = "p1";
  c.project = "p2";
  auto placed = Run(s, {a, b, c});
  CHECK(placed.count(1));
  CHECK_FALSE(placed.count(2));
  CHECK(placed.count(3));
  l.jobs = *ParseLimitValue("2");
  s.SetLimits({l});  // a reload: job 1 is counted again
  s.SetLimitTime(At(24, 12, 0), kUtc);
  CHECK(s.Limits()[0].buckets.at({}).jobs == 1);
  CHECK(Run(s, {}).count(2));
}

// Attacker's review, session 29 (F4): a start probe (EstimateStart, what the native adapter
// asks for its queue report) applied its placement and took it back, leaving a bucket of
// zero for its user in every per_user limit (shown by nexec limits to every account) and
// entries in the queue's per-user maps: one per name probed, for accounts with nothing queued.
TEST_CASE("a start probe leaves no trace of its user: no limit bucket and no per-user entry for an account with "
          "nothing queued [A16][B7]",
          "[A16][B7]") {
  Scheduler s = Cluster(1, 16);
  LimitConfig l = Limit("per-user");
  l.users = ParseConsumers("all", true);
  l.slots = *ParseLimitValue("8");
  s.SetLimits({l});
  s.SetLimitTime(At(24, 12, 0), kUtc);
  s.SetNow(At(24, 12, 0));
  REQUIRE(Run(s, {Job(1, "alice", 2)}).count(1));
  // One that would start now (placed and taken back), one its limit holds, one that fits
  // not even on the whole cluster.
  CHECK(s.EstimateStart(Job(0, "ghost", 1)).known());
  CHECK_FALSE(s.EstimateStart(Job(0, "ghost2", 9)).known());
  CHECK_FALSE(s.EstimateStart(Job(0, "ghost3", 16, "normal", "rusage[mem=999999]")).known());
  // Alice's own probe keeps her bucket as it was.
  CHECK(s.EstimateStart(Job(0, "alice", 1)).known());
  auto report = s.Limits();
  REQUIRE(report.size() == 1);
  std::vector<std::vector<std::string>> buckets;
  for (const auto& [key, usage] : report[0].buckets) buckets.push_back(key);
  CHECK(buckets == std::vector<std::vector<std::string>>{{"alice"}});
  CHECK(report[0].buckets.at({"alice"}).slots == 2);
  // The queue's per-user maps, as its orders see them (the fair-share report counts users).
  CHECK(s.UsersHolding("normal") == std::vector<std::string>{"alice"});
}

// The limit book alone (issue 48, "the house"): a unit of the scheduler's model that owns
// its buckets and knows nothing of hosts, queues or cycles.
TEST_CASE("the limit book counts placements in buckets, names what a placement takes past a limit, and forgets a "
          "probe's buckets [B7]",
          "[B7]") {
  LimitConfig per_user;
  per_user.name = "per-user";
  per_user.users = ParseConsumers("all", true);
  per_user.slots = *ParseLimitValue("4");
  LimitConfig on_h1;
  on_h1.name = "h1-jobs";
  on_h1.hosts = ParseConsumers("h1", false);
  on_h1.users = ParseConsumers("team", false);  // a group: its members
  on_h1.jobs = *ParseLimitValue("1");
  LimitBook book;
  book.Set({per_user, on_h1});
  book.SetTime(At(23, 10, 0), kUtc);
  const UserGroups groups = {{"team", {"alice", "bob"}}};

  auto placement = [](const std::string& host, int slots) {
    Placement p;
    HostAllocation a;
    a.host = host;
    a.slots = slots;
    p.sections.push_back({a});
    return p;
  };
  JobRequest alice;
  alice.user = "alice";
  alice.queue = "normal";
  book.Apply(alice, placement("h1", 3), +1, groups);
  CHECK(book.Exceeded(alice, placement("h1", 3), groups).empty());  // 3 of 4
  // One more slot is within the limit; two are past it, named with the bucket.
  book.Apply(alice, placement("h2", 2), +1, groups);
  CHECK(book.Exceeded(alice, placement("h2", 2), groups) == "limit per-user: slots 4 for alice (3 used, 2 asked)");
  book.Apply(alice, placement("h2", 2), -1, groups);

  // h1 holds one job of the team: bob is kept off h1, not off h2; carol is not in the team.
  JobRequest bob = alice, carol = alice;
  bob.user = "bob";
  carol.user = "carol";
  book.SelectForHosts(bob, groups);
  REQUIRE(book.any_host_limits());
  CHECK(book.HostLimited(bob, "h1"));
  CHECK_FALSE(book.HostLimited(bob, "h2"));
  book.SelectForHosts(carol, groups);
  CHECK_FALSE(book.any_host_limits());

  // A probe's buckets go; what was there stays.
  const LimitBook::Buckets before = book.Remember();
  book.Apply(carol, placement("h2", 1), +1, groups);
  book.Apply(carol, placement("h2", 1), -1, groups);
  book.Forget(before);
  std::set<std::vector<std::string>> users;
  for (const auto& report : book.Reports()) {
    if (report.config->name == "per-user") {
      for (const auto& [key, usage] : report.buckets) users.insert(key);
    }
  }
  CHECK(users == std::set<std::vector<std::string>>{{"alice"}});
}
