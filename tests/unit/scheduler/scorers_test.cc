// Each scoring strategy of SPEC A9 ranks candidate centers the way the standard says.

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <map>

#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/gpu_fragmentation.h"
#include "tests/unit/scheduler/scheduler_fixture.h"

namespace jc::scheduler {
namespace {

using testing::MakeCenter;
using testing::MakeRequest;

// Normalized scores of one strategy for every center of `snap`, by center id.
std::map<std::string, int> ScoresOf(const Scorer& scorer, const Snapshot& snap, const PlacementRequest& req,
                                    std::vector<std::string> siblings = {}) {
  std::vector<const CenterView*> centers;
  std::vector<const SpecAtCenter*> specs;
  for (const auto& c : snap.centers()) {
    centers.push_back(&c);
    specs.push_back(&c.specs.at(req.spec_id));
  }
  std::vector<const TopologyPath*> sib;
  for (const auto& s : siblings) sib.push_back(&snap.Find(s)->topology_path);
  std::vector<CandidateFacts> facts;
  for (const auto* c : centers) facts.push_back(FactsFor(req, *c));
  ScoringContext ctx{&req, &snap, centers, specs, sib, facts};
  std::vector<double> raw(centers.size());
  std::vector<int> scores(centers.size());
  scorer.Score(ctx, absl::MakeSpan(raw));
  NormalizeScores(raw, scorer.higher_is_better(), absl::MakeSpan(scores));
  std::map<std::string, int> out;
  for (size_t i = 0; i < centers.size(); ++i) out[centers[i]->id] = scores[i];
  return out;
}

TEST_CASE("normalization maps the best raw value to 100 and the worst to 0 [A9]", "[A9]") {
  std::vector<double> raw = {10, 20, 30};
  std::vector<int> s(3);
  NormalizeScores(raw, true, absl::MakeSpan(s));
  CHECK(s == std::vector<int>{0, 50, 100});
  NormalizeScores(raw, false, absl::MakeSpan(s));
  CHECK(s == std::vector<int>{100, 50, 0});
  std::vector<double> same = {7, 7};
  std::vector<int> s2(2);
  NormalizeScores(same, false, absl::MakeSpan(s2));
  CHECK(s2 == std::vector<int>{100, 100});
}

TEST_CASE("normalization rounds half up, the same for every length and direction [A9]", "[A9]") {
  // Formula: round(100 * (x - lo) / (hi - lo)), or from hi for lower-is-better, computed
  // two candidates at a time; odd lengths take the scalar tail.
  std::mt19937 random(7);
  std::uniform_real_distribution<double> value(-1000, 1000);
  for (size_t n = 1; n <= 9; ++n) {
    for (int round = 0; round < 50; ++round) {
      std::vector<double> raw(n);
      for (auto& x : raw) x = round % 5 == 0 ? std::floor(value(random) / 100) : value(random);
      double lo = *std::min_element(raw.begin(), raw.end()), hi = *std::max_element(raw.begin(), raw.end());
      for (bool higher : {true, false}) {
        std::vector<int> got(n);
        NormalizeScores(raw, higher, absl::MakeSpan(got));
        for (size_t i = 0; i < n; ++i) {
          int want = hi > lo ? static_cast<int>(100.0 * ((higher ? raw[i] - lo : hi - raw[i]) / (hi - lo)) + 0.5) : 100;
          INFO("n " << n << " i " << i << " x " << raw[i] << " higher " << higher);
          REQUIRE(got[i] == want);
        }
      }
    }
  }
  // Exact halves round up: 1 of 8 is 12.5 -> 13.
  std::vector<double> eighths = {0, 1, 8};
  std::vector<int> s(3);
  NormalizeScores(eighths, true, absl::MakeSpan(s));
  CHECK(s == std::vector<int>{0, 13, 100});
}

TEST_CASE("every built-in strategy is registered once under its algorithm id [A9]", "[A9]") {
  ScorerRegistry registry;
  RegisterBuiltinScorers(registry);
  CHECK(registry.size() == 13);
  for (const char* id : {"least_load", "spec_free_capacity", "data_topology_affinity", "lowest_price",
                         "lowest_energy", "highest_performance", "highest_security", "load_fairness", "network",
                         "data_aware", "qos_deadline", "expected_completion", "gpu_fragmentation"}) {
    INFO(id);
    REQUIRE(registry.Find(id) != nullptr);
    CHECK_FALSE(registry.Find(id)->description().empty());
    CHECK_FALSE(registry.Find(id)->inputs().empty());
  }
  CHECK(registry.Register(MakeLeastLoadScorer()).code() == absl::StatusCode::kAlreadyExists);
}

TEST_CASE("least load and load fairness prefer the center with fewer jobs [A9]", "[A9]") {
  Snapshot snap;
  CenterView a = MakeCenter("a"), b = MakeCenter("b"), c = MakeCenter("c");
  a.running_tasks = 10;
  b.running_tasks = 2, b.waiting_tasks = 3;  // 5
  c.running_tasks = 0, c.assumed_replicas = 0;
  snap.Upsert(a), snap.Upsert(b), snap.Upsert(c);
  auto req = MakeRequest();
  auto least = ScoresOf(*MakeLeastLoadScorer(), snap, req);
  CHECK(least == std::map<std::string, int>{{"a", 0}, {"b", 50}, {"c", 100}});
  auto fair = ScoresOf(*MakeLoadFairnessScorer(), snap, req);
  CHECK(fair.at("c") == 100);
  CHECK(fair.at("a") == 0);
  CHECK(fair.at("b") > fair.at("a"));
}

TEST_CASE("spec free capacity prefers the center where more replicas of the spec still fit [A9]", "[A9]") {
  Snapshot snap;
  CenterView a = MakeCenter("a"), b = MakeCenter("b");
  a.free.gpu = 2;  // 2 more gpu-1 replicas
  b.free.gpu = 8;  // 8, and CPUs allow 16
  snap.Upsert(a), snap.Upsert(b);
  auto s = ScoresOf(*MakeSpecFreeCapacityScorer(), snap, MakeRequest());
  CHECK(s == std::map<std::string, int>{{"a", 0}, {"b", 100}});
}

TEST_CASE("gpu fragmentation puts a narrow replica where the free GPUs are already broken up [A9][A16]",
          "[A9][A16]") {
  // Free GPUs a replica of 2, 4, 8, 16 or 32 could not use, averaged over the five sizes.
  CHECK(UnusableAccelerators(0) == 0);
  CHECK(UnusableAccelerators(32) == 0);
  CHECK(UnusableAccelerators(64) == 0);
  CHECK(UnusableAccelerators(31) == Approx((1 + 3 + 7 + 15 + 31) / 5.0));
  CHECK(UnusableAccelerators(48) == Approx(16 / 5.0));  // one 32 fits, 16 left over for it
  CHECK(UnusableAccelerators(5.7) == Approx((1 + 1 + 5 + 5 + 5) / 5.0));  // whole GPUs only
  CHECK(UnusableAccelerators(7.9999999999) == Approx((0 + 0 + 0 + 8 + 8) / 5.0));  // tenths summed
  CHECK(UnusableAccelerators(-3) == 0);
  CHECK(UnusableAccelerators(std::numeric_limits<double>::infinity()) >= 0);  // capped, no overflow

  Snapshot snap;
  CenterView whole = MakeCenter("whole"), broken = MakeCenter("broken");
  whole.free.gpu = 32;  // a 32-GPU replica fits here, and nowhere else
  broken.free.gpu = 5;
  snap.Upsert(whole), snap.Upsert(broken);
  // One GPU at `whole` leaves 31 that no 32-GPU replica can use; at `broken` it leaves 4,
  // a whole block of 4.
  auto s = ScoresOf(*MakeGpuFragmentationScorer(), snap, MakeRequest());
  CHECK(s == std::map<std::string, int>{{"broken", 100}, {"whole", 0}});

  // A replica that takes a center's whole free block leaves nothing broken: best fit.
  Snapshot eights;
  CenterView exact = MakeCenter("exact"), big = MakeCenter("big");
  for (CenterView* c : {&exact, &big}) c->specs["gpu-8"] = SpecAtCenter{{32, 8, 0, 0, 65536, 0}, 10, 400};
  exact.free.gpu = 8;
  big.free.gpu = 32;
  eights.Upsert(exact), eights.Upsert(big);
  PlacementRequest wide = MakeRequest();
  wide.spec_id = "gpu-8";
  CHECK(ScoresOf(*MakeGpuFragmentationScorer(), eights, wide) ==
        std::map<std::string, int>{{"big", 0}, {"exact", 100}});

  // A busy center (weighed by the "completion" profile, which may wait for one) takes no
  // GPU now: neither better nor worse than leaving the blocks as they are.
  CenterView busy = MakeCenter("busy");
  busy.specs["gpu-8"] = SpecAtCenter{{32, 8, 0, 0, 65536, 0}, 10, 400};
  busy.free.gpu = 7;
  eights.Upsert(busy);
  // Raw: exact -3.2 (mends its block), busy 0, big +6.4 (breaks the block of 32).
  CHECK(ScoresOf(*MakeGpuFragmentationScorer(), eights, wide) ==
        std::map<std::string, int>{{"big", 0}, {"busy", 67}, {"exact", 100}});

  // A replica of CPUs only: every center alike.
  auto scorer = MakeGpuFragmentationScorer();
  Snapshot cpus;
  CenterView plain = MakeCenter("plain"), other = MakeCenter("other");
  for (CenterView* c : {&plain, &other}) c->specs["cpu-4"] = SpecAtCenter{{4, 0, 0, 0, 8192, 0}, 10, 100};
  other.free.gpu = 3;
  cpus.Upsert(plain), cpus.Upsert(other);
  PlacementRequest cpu_only = MakeRequest();
  cpu_only.spec_id = "cpu-4";
  CHECK(ScoresOf(*scorer, cpus, cpu_only) == std::map<std::string, int>{{"other", 100}, {"plain", 100}});
}

TEST_CASE("lowest price prefers where the replica costs least: price per hour times the hours held [A9]", "[A9]") {
  Snapshot snap;
  snap.Upsert(MakeCenter("a", 30)), snap.Upsert(MakeCenter("b", 10)), snap.Upsert(MakeCenter("c", 20));
  auto s = ScoresOf(*MakeLowestPriceScorer(), snap, MakeRequest());
  CHECK(s == std::map<std::string, int>{{"a", 0}, {"b", 100}, {"c", 50}});
  // Twice the price at three times the speed costs less in the end: 20 x 1/3 h < 10 x 1 h.
  CenterView fast = MakeCenter("fast", 20);
  fast.performance_factor = 3;
  Snapshot speeds;
  speeds.Upsert(MakeCenter("slow", 10)), speeds.Upsert(fast);
  auto t = ScoresOf(*MakeLowestPriceScorer(), speeds, MakeRequest());
  CHECK(t == std::map<std::string, int>{{"fast", 100}, {"slow", 0}});
}

TEST_CASE("lowest energy follows formula 1: static power while data moves, execution power while it runs [A9]",
          "[A9]") {
  Snapshot snap;
  CenterView a = MakeCenter("a"), b = MakeCenter("b"), c = MakeCenter("c");
  // 1 h run at 400 W = 1,440,000 J everywhere; a holds the data, b and c must copy
  // 9,000 MB at 1000 Mbit/s = 72 s, at 1000 W (b) or 5000 W (c) static power.
  a.datasets.insert("imagenet:1");
  c.static_power_watts = 5000;
  snap.Upsert(a), snap.Upsert(b), snap.Upsert(c);
  auto req = MakeRequest();
  req.datasets.push_back({"imagenet:1", 9000, false, {TopologyPath::Parse("cn/north/a")}});
  auto s = ScoresOf(*MakeLowestEnergyScorer(), snap, req);
  // a: 1,440,000 J; b: +72,000 J; c: +360,000 J.
  CHECK(s == std::map<std::string, int>{{"a", 100}, {"b", 80}, {"c", 0}});

  // A faster center runs for less time at the same power.
  Snapshot fast;
  CenterView d = MakeCenter("d"), e = MakeCenter("e");
  e.performance_factor = 2;
  fast.Upsert(d), fast.Upsert(e);
  auto f = ScoresOf(*MakeLowestEnergyScorer(), fast, MakeRequest());
  CHECK(f == std::map<std::string, int>{{"d", 0}, {"e", 100}});
}

TEST_CASE("highest performance and highest security prefer the higher figure [A9]", "[A9]") {
  Snapshot snap;
  CenterView a = MakeCenter("a"), b = MakeCenter("b");
  a.performance_factor = 1.5, a.security_grade = 2;
  b.performance_factor = 1.0, b.security_grade = 5;
  snap.Upsert(a), snap.Upsert(b);
  CHECK(ScoresOf(*MakeHighestPerformanceScorer(), snap, MakeRequest()) ==
        std::map<std::string, int>{{"a", 100}, {"b", 0}});
  CHECK(ScoresOf(*MakeHighestSecurityScorer(), snap, MakeRequest()) ==
        std::map<std::string, int>{{"a", 0}, {"b", 100}});
}

TEST_CASE("network-aware weighs bandwidth against loss, latency and jitter [A9]", "[A9]") {
  Snapshot snap;
  CenterView a = MakeCenter("a"), b = MakeCenter("b"), c = MakeCenter("c");
  a.network = {10000, 100, 0, 0};   // 10 Gbit/s but 100 ms: 5000
  b.network = {1000, 0, 0, 0};      // 1000
  c.network = {10000, 0, 0, 0.5};   // half lost: 5000 ... then jitter
  c.network.jitter_ms = 50;         // 5000 / 2 = 2500
  snap.Upsert(a), snap.Upsert(b), snap.Upsert(c);
  auto s = ScoresOf(*MakeNetworkAwareScorer(), snap, MakeRequest());
  CHECK(s == std::map<std::string, int>{{"a", 100}, {"b", 0}, {"c", 38}});
}

TEST_CASE("data-aware moves the job to the data: the less must move, the higher [A9]", "[A9]") {
  Snapshot snap;
  CenterView a = MakeCenter("a"), b = MakeCenter("b"), c = MakeCenter("c");
  a.datasets = {"big:1"};
  b.datasets = {"small:1"};
  snap.Upsert(a), snap.Upsert(b), snap.Upsert(c);
  auto req = MakeRequest();
  req.datasets.push_back({"big:1", 100000, false, {TopologyPath::Parse("cn/north/a")}});
  req.datasets.push_back({"small:1", 10, false, {TopologyPath::Parse("cn/north/b")}});
  auto s = ScoresOf(*MakeDataAwareScorer(), snap, req);
  CHECK(s.at("a") == 100);  // only 10 MB to move
  CHECK(s.at("c") == 0);    // everything
  CHECK(s.at("b") == 0);    // the big one: within 1 point of c
}

TEST_CASE("data-topology affinity prefers centers near the job's other replicas and data [A9]", "[A9]") {
  Snapshot snap;
  CenterView a = MakeCenter("a"), b = MakeCenter("b"), c = MakeCenter("c");
  a.topology = "cn/north/bj/dc1";
  b.topology = "cn/north/bj/dc2";
  c.topology = "cn/south/gz/dc1";
  snap.Upsert(a), snap.Upsert(b), snap.Upsert(c);
  auto s = ScoresOf(*MakeDataTopologyAffinityScorer(), snap, MakeRequest(), {"a"});
  CHECK(s.at("a") == 100);
  CHECK(s.at("b") > s.at("c"));
  CHECK(s.at("c") == 0);
}

TEST_CASE("QoS prefers the center that finishes with the most slack before the deadline [A9]", "[A9]") {
  Snapshot snap;
  CenterView a = MakeCenter("a"), b = MakeCenter("b"), c = MakeCenter("c");
  a.performance_factor = 1;  // 3600 s
  b.performance_factor = 2;  // 1800 s
  c.performance_factor = 4;  // 900 s
  snap.Upsert(a), snap.Upsert(b), snap.Upsert(c);
  auto req = MakeRequest();
  req.deadline = req.now + absl::Minutes(45);
  auto s = ScoresOf(*MakeQosDeadlineScorer(), snap, req);
  CHECK(s == std::map<std::string, int>{{"a", 0}, {"b", 67}, {"c", 100}});
}

}  // namespace
}  // namespace jc::scheduler
