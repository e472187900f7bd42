// Consumable resources in the executor's scheduler (SPEC B1, RESS fields): rusage[] of a
// static or sensor number reserves from it per slot or per job, `assign` hands out units,
// a locale shares one stock between hosts, `release` gives it back while suspended.

#include <catch2/catch.hpp>

#include "executor/policy/scheduler.h"
#include "tests/unit/executor/scheduler_cycle.h"

using namespace jc::nexec;

namespace {

Scheduler Cluster(const std::vector<std::pair<std::string, double>>& hosts, const std::string& resource) {
  Scheduler s;
  for (const auto& [name, value] : hosts) {
    HostConfig c;
    c.name = name;
    c.slots = 8;
    c.mem_mb = 8192;
    c.resources[resource] = value;
    REQUIRE(s.AddHost(c).ok());
  }
  QueueConfig q;
  q.name = "normal";
  REQUIRE(s.AddQueue(q).ok());
  return s;
}

JobRequest Job(int64_t id, int slots, const std::string& requirement) {
  return testing::MakeJob(id, "u", slots, "normal", requirement);
}

std::map<int64_t, Placement> Run(Scheduler& s, const std::vector<JobRequest>& jobs) {
  return testing::RunCycle(s, jobs);
}

}  // namespace

TEST_CASE("rusage[] of a host's number reserves per slot from it, and select[] sees what is left", "[B1]") {
  Scheduler s = Cluster({{"h1", 3}}, "licenses");
  auto placed = Run(s, {Job(1, 2, "rusage[licenses=1]"), Job(2, 2, "rusage[licenses=1]"),
                        Job(3, 1, "select[licenses>0] rusage[licenses=1]")});
  REQUIRE(placed.count(1));
  CHECK(placed[1].sections[0][0].reserved.at("licenses") == 2);
  CHECK_FALSE(placed.count(2));  // 1 left, 2 asked
  REQUIRE(placed.count(3));      // the last one, and select[] saw it
  CHECK(Run(s, {Job(4, 1, "select[licenses>0]")}).empty());  // none left: select[] sees 0
  REQUIRE(s.Release(1).ok());
  auto next = Run(s, {});
  CHECK(next.count(2));        // first come: it takes the two freed
  CHECK_FALSE(next.count(4));  // and select[] sees none left again
  REQUIRE(s.Release(3).ok());
  CHECK(Run(s, {}).count(4));
}

TEST_CASE("a per-job resource (slotresource: false) is reserved once, however many slots", "[B1]") {
  Scheduler s = Cluster({{"h1", 150}}, "scratch");
  ResourceTraits per_job;
  per_job.per_slot = false;
  s.SetResourceTraits("scratch", per_job);
  auto placed = Run(s, {Job(1, 4, "rusage[scratch=100]"), Job(2, 1, "rusage[scratch=100]")});
  REQUIRE(placed.count(1));
  CHECK(placed[1].sections[0][0].reserved.at("scratch") == 100);
  CHECK_FALSE(placed.count(2));
  REQUIRE(s.Release(1).ok());
  CHECK(Run(s, {}).count(2));
}

TEST_CASE("an assign resource hands out distinct units, lowest free first", "[B1]") {
  Scheduler s = Cluster({{"h1", 4}}, "port");
  ResourceTraits assign;
  assign.assign = true;
  s.SetResourceTraits("port", assign);
  auto placed = Run(s, {Job(1, 1, "rusage[port=2]"), Job(2, 1, "rusage[port=1.5]"), Job(3, 1, "rusage[port=1]")});
  REQUIRE(placed.count(1));
  REQUIRE(placed.count(2));
  CHECK(placed[1].sections[0][0].units.at("port") == std::vector<int>{0, 1});
  CHECK(placed[2].sections[0][0].units.at("port") == std::vector<int>{2, 3});  // units are whole
  CHECK_FALSE(placed.count(3));
  REQUIRE(s.Release(1).ok());
  auto next = Run(s, {});
  REQUIRE(next.count(3));
  CHECK(next[3].sections[0][0].units.at("port") == std::vector<int>{0});
}

TEST_CASE("a shared resource is one stock for all its hosts, also within one job", "[B1]") {
  Scheduler s = Cluster({{"h1", 3}, {"h2", 3}}, "lic");
  REQUIRE(s.SetSharedResource("lic", "", {"h1", "h2"}, 3).ok());
  // Two slots on two hosts take two of the three; a second such job does not fit, a
  // one-slot job does, and then select[] on either host sees none left.
  auto placed = Run(s, {Job(1, 2, "span[ptile=1] rusage[lic=1]"), Job(2, 2, "span[ptile=1] rusage[lic=1]"),
                        Job(3, 1, "rusage[lic=1]")});
  REQUIRE(placed.count(1));
  CHECK(placed[1].sections[0].size() == 2);
  CHECK_FALSE(placed.count(2));
  CHECK(placed.count(3));
  CHECK(Run(s, {Job(4, 1, "select[lic>0]")}).empty());
  // One job cannot take more than the stock by spreading over its hosts.
  REQUIRE(s.Release(1).ok());
  REQUIRE(s.Release(3).ok());
  auto wide = Run(s, {Job(5, 4, "span[ptile=2] rusage[lic=1]")});
  CHECK_FALSE(wide.count(5));
  CHECK(wide.count(2));
  CHECK(wide.count(4));
}

TEST_CASE("a shared assign resource never gives one unit to two hosts", "[B1]") {
  Scheduler s = Cluster({{"h1", 4}, {"h2", 4}}, "fpga");
  ResourceTraits assign;
  assign.assign = true;
  s.SetResourceTraits("fpga", assign);
  REQUIRE(s.SetSharedResource("fpga", "h1 h2", {"h1", "h2"}, 4).ok());
  auto placed = Run(s, {Job(1, 2, "span[ptile=1] rusage[fpga=2]")});
  REQUIRE(placed.count(1));
  const auto& hosts = placed[1].sections[0];
  REQUIRE(hosts.size() == 2);
  CHECK(hosts[0].units.at("fpga") == std::vector<int>{0, 1});
  CHECK(hosts[1].units.at("fpga") == std::vector<int>{2, 3});
}

TEST_CASE("a released resource goes back while its job is suspended and is taken again on resume", "[B1]") {
  Scheduler s = Cluster({{"h1", 2}}, "bandwidth");
  ResourceTraits released;
  released.release = true;
  s.SetResourceTraits("bandwidth", released);
  REQUIRE(Run(s, {Job(1, 1, "rusage[bandwidth=2]")}).count(1));
  CHECK(Run(s, {Job(2, 1, "rusage[bandwidth=1]")}).empty());
  REQUIRE(s.SetSuspended(1, true).ok());
  CHECK(Run(s, {}).count(2));  // job 1's share is free while it is stopped
  REQUIRE(s.SetSuspended(1, false).ok());  // resumed: it holds its share again (2 + 1 > 2)
  CHECK(Run(s, {Job(3, 1, "rusage[bandwidth=1]")}).empty());
  // Ending while suspended gives back exactly what it held.
  REQUIRE(s.SetSuspended(1, true).ok());
  REQUIRE(s.Release(1).ok());
  REQUIRE(s.Release(2).ok());
  auto after = Run(s, {Job(4, 1, "rusage[bandwidth=1]")});
  CHECK(after.count(3));
  CHECK(after.count(4));
  CHECK(Run(s, {Job(5, 1, "rusage[bandwidth=1]")}).empty());  // exactly 2 again
}

TEST_CASE("a resource a suspension does not release stays held", "[B1]") {
  Scheduler s = Cluster({{"h1", 1}}, "scratch");
  REQUIRE(Run(s, {Job(1, 1, "rusage[scratch=1]")}).count(1));
  REQUIRE(s.SetSuspended(1, true).ok());
  CHECK(Run(s, {Job(2, 1, "rusage[scratch=1]")}).empty());
}

TEST_CASE("a host joining a shared stock shares what is already reserved from it", "[B1]") {
  Scheduler s = Cluster({{"h1", 1}, {"h2", 1}}, "lic");
  REQUIRE(s.SetSharedResource("lic", "", {"h1"}, 1).ok());
  auto first = Run(s, {Job(1, 1, "rusage[lic=1]")});
  REQUIRE(first.count(1));
  REQUIRE(s.SetSharedResource("lic", "", {"h1", "h2"}, 1).ok());  // h2 joined the cluster
  CHECK(Run(s, {Job(2, 1, "select[hname==h2] rusage[lic=1]")}).empty());
  REQUIRE(s.Release(1).ok());
  CHECK(Run(s, {}).count(2));
}

TEST_CASE("what a host's jobs reserved before it joined a shared stock counts against the stock", "[B1]") {
  // A restarted master restores running jobs before any sensor reported: their
  // reservations land on each host's own value, and move to the stock when it appears.
  Scheduler s = Cluster({{"h1", 1}, {"h2", 1}}, "lic");
  ResourceTraits assign;
  assign.assign = true;
  s.SetResourceTraits("port", assign);
  REQUIRE(s.SetHostResource("h1", "port", 2.0).ok());
  REQUIRE(s.SetHostResource("h2", "port", 2.0).ok());
  auto before = Run(s, {Job(1, 1, "select[hname==h1] rusage[lic=1:port=1]")});
  REQUIRE(before.count(1));
  CHECK(before[1].sections[0][0].units.at("port") == std::vector<int>{0});
  REQUIRE(s.AddToSharedResource("lic", "", "h1", 1).ok());
  REQUIRE(s.AddToSharedResource("lic", "", "h2", 1).ok());
  REQUIRE(s.SetSharedResource("port", "h1 h2", {"h1", "h2"}, 2).ok());
  auto after = Run(s, {Job(2, 1, "select[hname==h2] rusage[lic=1]"), Job(3, 1, "select[hname==h2] rusage[port=1]")});
  CHECK_FALSE(after.count(2));  // the one license is job 1's
  REQUIRE(after.count(3));
  CHECK(after[3].sections[0][0].units.at("port") == std::vector<int>{1});  // unit 0 is job 1's
  REQUIRE(s.Release(1).ok());
  CHECK(Run(s, {}).count(2));
}

TEST_CASE("a reservation no host can hold is refused at submit with why: GPUs past any host, a number that is "
          "not finite, memory past the largest host [B1]",
          "[B1]") {
  QueueConfig normal;
  normal.name = "normal";
  Scheduler s = testing::OneHost(8, normal);
  auto refused = [&](const std::string& requirement) {
    JobRequest job = testing::MakeJob(1, "u", 1, "normal", requirement);
    return s.Check(&job);
  };
  const absl::Status gpus = refused("rusage[gpu=100000000000000000000]");
  CHECK(absl::IsInvalidArgument(gpus));
  CHECK(gpus.message().find("more GPUs per slot than any host has") != absl::string_view::npos);
  const absl::Status infinite = refused("rusage[mem=" + std::string(400, '9') + "]");
  CHECK(absl::IsInvalidArgument(infinite));
  CHECK(infinite.message().find("rusage[mem] must be a finite number") != absl::string_view::npos);
  CHECK(refused("rusage[mem=1024,gpu=1]").ok());
  // Finite but more memory per slot than the largest host has (65,536 MB): it would wait for
  // ever. As much as the host has is taken.
  const absl::Status huge = refused("rusage[mem=1000000000000000]");
  CHECK(absl::IsInvalidArgument(huge));
  CHECK(huge.message() == "rusage[mem=1e+15] asks for more memory per slot than the largest host has (65536 MB)");
  CHECK(absl::IsInvalidArgument(refused("2{rusage[mem=1024]} 1{rusage[mem=70000]}")));
  CHECK(refused("rusage[mem=65536]").ok());
  // On one host, every slot's memory together (a spec the size of a host, rounded up per
  // slot, once asked for more than the host and waited).
  JobRequest whole = testing::MakeJob(1, "u", 3, "normal", "rusage[mem=21846] span[hosts=1]");
  const absl::Status too_much = s.Check(&whole);
  CHECK(too_much.message() == "span[hosts=1] with rusage[mem=21846] asks for 65538 MB on one host; the largest host "
                              "has 65536 MB");
  JobRequest fits = testing::MakeJob(1, "u", 3, "normal", "rusage[mem=21845.333] span[hosts=1]");
  CHECK(s.Check(&fits).ok());
  // A host that comes back with more memory lets it in; one that shrinks keeps it out.
  REQUIRE(s.UpdateHostCapacity("h1", 8, 200000.5, 0, {}).ok());
  CHECK(refused("rusage[mem=100000]").ok());
  CHECK(refused("rusage[mem=200001]").message() ==
        "rusage[mem=200001] asks for more memory per slot than the largest host has (200000.5 MB)");
  REQUIRE(s.UpdateHostCapacity("h1", 8, 4096, 0, {}).ok());
  CHECK(absl::IsInvalidArgument(refused("rusage[mem=8192]")));
}

TEST_CASE("a tiny memory reservation per slot is placed, and memory in fractions fills a host to the last "
          "fraction [B1]",
          "[B1]") {
  QueueConfig normal;
  normal.name = "normal";
  Scheduler s = testing::OneHost(8, normal);  // 65,536 MB
  // 65,536 / 1e-7 slots is past any int: the cast of it was undefined (on x86 a negative
  // capacity: the job never started).
  auto placed = testing::RunCycle(s, {testing::MakeJob(1, "u", 2, "normal", "rusage[mem=0.0000001]")});
  CHECK(placed.count(1) == 1);
  // 3 slots of 21,845.333 MB each in the 65,536 MB left... less the tiny job's.
  auto third = testing::RunCycle(s, {testing::MakeJob(2, "u", 3, "normal", "rusage[mem=21845.3333] span[hosts=1]")});
  CHECK(third.count(2) == 1);
}

// helper-56: span[hosts=1] passed when the most slots were on one host and the most memory
// (or the GPUs) on another, and the job waited for ever.
TEST_CASE("span[hosts=1] is refused at submit when no one host has its slots, their memory and their GPUs "
          "together, and taken when one has [B1]",
          "[B1]") {
  QueueConfig normal, shared;
  normal.name = "normal";
  shared.name = "shared";
  shared.gpu_shared = true;
  Scheduler s = testing::OneHost(8, normal);  // h1: 8 slots, 65,536 MB, no GPUs
  REQUIRE(s.AddQueue(shared).ok());
  HostConfig big;
  big.name = "h2";
  big.slots = 2;
  big.mem_mb = 262144;
  big.gpus = {0, 1};
  REQUIRE(s.AddHost(big).ok());
  auto check = [&](const std::string& queue, int slots, const std::string& requirement) {
    JobRequest job = testing::MakeJob(1, "u", slots, queue, requirement);
    return s.Check(&job);
  };
  // 4 slots of 20,000 MB: h1 has the slots, h2 the memory, neither both.
  const absl::Status split = check("normal", 4, "rusage[mem=20000] span[hosts=1]");
  CHECK(absl::IsInvalidArgument(split));
  CHECK(split.message() == "span[hosts=1] asks for 4 slots, 80000 MB and 0 GPUs on one host; no host has all three");
  CHECK(check("normal", 4, "rusage[mem=16000] span[hosts=1]").ok());  // h1 holds it
  CHECK(check("normal", 4, "rusage[mem=20000]").ok());                // not on one host: h1 and h2 together
  // GPUs: 2 slots of one GPU each fit h2; 3 slots of a GPU fit no host (h1 has none).
  CHECK(check("normal", 2, "rusage[gpu=1] span[hosts=1]").ok());
  CHECK(absl::IsInvalidArgument(check("normal", 3, "rusage[gpu=1] span[hosts=1]")));
  // Where GPUs are shared between jobs, one job's slots still take distinct GPUs of the host.
  CHECK(check("shared", 2, "rusage[gpu=1] span[hosts=1]").ok());
  CHECK(absl::IsInvalidArgument(check("shared", 3, "rusage[gpu=1] span[hosts=1]")));
}
