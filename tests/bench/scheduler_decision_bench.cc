// Benchmark (a) of issue 5: scheduling decisions per second in-process, 100 centers,
// every built-in scoring strategy weighted (the "default" profile), one replica per
// decision. Target: at least 100,000 decisions/s.
//   scheduler_decision_bench [centers=100] [decisions=200000] [threads=1]
// Prints decisions/s without and with the explanation record.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "services/scheduler/placer.h"
#include "services/scheduler/scoring/builtin_scorers.h"

using namespace jc::scheduler;

namespace {

Snapshot MakeNetwork(int n) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  Snapshot snap;
  for (int i = 0; i < n; ++i) {
    CenterView c;
    c.id = absl::StrCat("center-", i);
    c.available = u(rng) > 0.05;
    c.security_grade = 1 + i % 5;
    c.topology = absl::StrCat("cn/r", i % 4, "/c", i % 13, "/dc", i);
    c.capacity = {512, 64, 0, 0, 4194304, 100000};
    c.free = {512 * u(rng), 64 * u(rng), 0, 0, 4194304 * u(rng), 100000};
    c.running_tasks = static_cast<int>(200 * u(rng));
    c.waiting_tasks = static_cast<int>(50 * u(rng));
    c.static_power_watts = 5000 + 10000 * u(rng);
    c.performance_factor = 0.5 + 2 * u(rng);
    c.network = {1000 + 9000 * u(rng), 50 * u(rng), 5 * u(rng), 0.01 * u(rng)};
    c.specs["gpu-1"] = SpecAtCenter{{4, 1, 0, 0, 16384, 0}, 5 + 20 * u(rng), 300 + 200 * u(rng)};
    c.specs["cpu-8"] = SpecAtCenter{{8, 0, 0, 0, 32768, 0}, 1 + 2 * u(rng), 150};
    c.images = {"pytorch-2.1", "tensorflow-2.15"};
    if (i % 7 == 0) c.datasets.insert("imagenet:2012");
    if (i % 11 == 0) c.datasets.insert("wiki:2024");
    snap.Upsert(std::move(c));
  }
  return snap;
}

PlacementRequest MakeRequest() {
  PlacementRequest r;
  r.job_id = "bench";
  r.spec_id = "gpu-1";
  r.image_id = "pytorch-2.1";
  r.datasets.push_back({"imagenet:2012", 150000, false,
                         {TopologyPath::Parse("cn/r0/c0/dc0"), TopologyPath::Parse("cn/r3/c7/dc7")}});
  r.datasets.push_back({"wiki:2024", 20000, false, {TopologyPath::Parse("cn/r0/c0/dc0")}});
  r.sibling_centers = {"center-3"};
  r.now = absl::Now();
  r.deadline = r.now + absl::Hours(2);
  return r;
}

// Decisions per second of one placer over `count` decisions.
double Run(const Snapshot& snap, const ScorerRegistry& registry, const std::vector<double>& weights, int count,
           bool explain, int* placed) {
  WeightedSumModel model;
  Placer placer(registry, model);
  PlacementRequest req = MakeRequest();
  jointcloud::v1::ReplicaPlacement record;
  auto start = std::chrono::steady_clock::now();
  int ok = 0;
  for (int i = 0; i < count; ++i) {
    req.replica_index = i;
    ok += placer.Place(req, snap, weights, explain ? &record : nullptr).center >= 0;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *placed = ok;
  return count / secs;
}

}  // namespace

int main(int argc, char** argv) {
  int centers = argc > 1 ? std::atoi(argv[1]) : 100;
  int decisions = argc > 2 ? std::atoi(argv[2]) : 200000;
  int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  ScorerRegistry registry;
  RegisterBuiltinScorers(registry);
  auto weights = *WeightProfiles::Builtin().Resolve("", {}, registry);
  Snapshot snap = MakeNetwork(centers);

  std::printf("scheduler decisions: %d centers, %zu scorers (all weighted), %d decisions per thread\n", centers,
              registry.size(), decisions);
  for (bool explain : {false, true}) {
    int count = explain ? decisions / 20 : decisions;
    std::vector<double> rates(threads);
    std::vector<int> placed(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] { rates[t] = Run(snap, registry, weights, count, explain, &placed[t]); });
    }
    for (auto& th : pool) th.join();
    double total = 0;
    for (double r : rates) total += r;
    std::printf("%-22s %10.0f decisions/s (%d threads; %d of %d placed)  target >= 100000: %s\n",
                explain ? "with explanation:" : "decisions:", total, threads, placed[0], count,
                explain ? "n/a" : (total >= 100000 ? "MET" : "NOT MET"));
  }
  return 0;
}
