// Placement quality and simulator speed (issue 13's targets), printed, never asserted:
//   1. On a 10-center heterogeneous federation at 80% offered load, averaged over seeds:
//      the default profile's mean JCT against FCFS with first fit (target: >= 25% better),
//      and whether any single scorer beats it on mean JCT, cost and energy all at once
//      (target: none).
//   2. 100,000 jobs over 1,000 centers with the default profile: wall and CPU time
//      (target: under 60 s).
// usage: placement_quality_bench [seeds=5] [jobs=5000] [scale_jobs=100000] [scale_centers=1000]

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "tools/sim/experiments.h"
#include "tools/sim/federation.h"
#include "tools/sim/generator.h"
#include "tools/sim/policy.h"

using namespace jc::sim;

int main(int argc, char** argv) {
  int seeds = argc > 1 ? std::atoi(argv[1]) : 5;
  int jobs = argc > 2 ? std::atoi(argv[2]) : 5000;
  int scale_jobs = argc > 3 ? std::atoi(argv[3]) : 100000;
  int scale_centers = argc > 4 ? std::atoi(argv[4]) : 1000;
  PolicyCatalog catalog;
  std::vector<std::string> policies = DefaultPolicies(catalog);
  struct Sum {
    double jct = 0, cost = 0, energy = 0;
  };
  std::map<std::string, Sum> sums;
  for (int s = 1; s <= seeds; ++s) {
    Federation f = GenerateFederation(10, 1);
    GeneratorOptions g;
    g.jobs = jobs;
    g.load = 0.8;
    g.seed = s;
    auto trace = GenerateTrace(g, f);
    if (!trace.ok()) return std::fprintf(stderr, "%s\n", std::string(trace.status().message()).c_str()), 1;
    std::vector<SimOptions> runs;
    for (const auto& p : policies) {
      SimOptions o;
      o.policy = p;
      runs.push_back(o);
    }
    auto results = RunAll(f, *trace, runs, catalog);
    if (!results.ok()) return std::fprintf(stderr, "%s\n", std::string(results.status().message()).c_str()), 1;
    for (const auto& r : *results) {
      Sum& sum = sums[r.metrics.policy];
      sum.jct += r.metrics.mean_jct / seeds;
      sum.cost += r.metrics.cost / seeds;
      sum.energy += r.metrics.energy_kwh / seeds;
    }
  }
  const Sum& d = sums["profile:default"];
  std::printf("10 centers, 80%% offered load, %d jobs x %d seeds (means over seeds)\n", jobs, seeds);
  std::printf("%-32s %10s %12s %10s\n", "POLICY", "MEAN_JCT", "COST", "ENERGY_KWH");
  int dominating = 0;
  for (const auto& p : policies) {
    const Sum& v = sums[p];
    bool dominates = p.rfind("scorer:", 0) == 0 && v.jct < d.jct && v.cost < d.cost && v.energy < d.energy;
    dominating += dominates;
    std::printf("%-32s %10.0f %12.1f %10.1f%s\n", p.c_str(), v.jct, v.cost, v.energy,
                dominates ? "  <- better than default on all three" : "");
  }
  const Sum& ff = sums["first_fit"];
  std::printf("default profile vs first fit, mean JCT: %.1f%% better (target >= 25%%)\n", 100 * (1 - d.jct / ff.jct));
  std::printf("single scorers better than default on JCT, cost and energy at once: %d (target 0)\n", dominating);

  if (scale_jobs > 0) {
    Federation big = GenerateFederation(scale_centers, 1);
    GeneratorOptions g;
    g.jobs = scale_jobs;
    g.load = 0.8;
    auto trace = GenerateTrace(g, big);
    if (!trace.ok()) return 1;
    SimOptions o;
    auto r = RunAll(big, *trace, {o}, catalog, 1);
    if (!r.ok()) return std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str()), 1;
    const RunMetrics& m = (*r)[0].metrics;
    std::printf("scale: %d jobs over %d centers with the default profile: %.1f s wall, %.1f s CPU "
                "(%.0f us of CPU per job, %lld decisions; target < 60 s)\n",
                m.jobs, scale_centers, m.wall_seconds, m.cpu_seconds, 1e6 * m.cpu_seconds / m.jobs,
                static_cast<long long>(m.decisions));
  }
  return 0;
}
