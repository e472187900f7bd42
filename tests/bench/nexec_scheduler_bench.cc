// Benchmark (a) of the executor issue: scheduling decisions per second in-process with
// 1,000 hosts and 100,000 queued jobs. Prints its figures; asserts nothing.
//   build/tests/bench/nexec_scheduler_bench [hosts] [jobs]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "executor/policy/scheduler.h"

using namespace jc::nexec;

namespace {

// The benchmark's own setup must not fail silently.
void Must(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "setup failed: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int hosts = argc > 1 ? std::atoi(argv[1]) : 1000;
  int jobs = argc > 2 ? std::atoi(argv[2]) : 100000;
  Scheduler s;
  Must(s.AddHostType({"fast", 2.0}));
  for (int i = 0; i < hosts; ++i) {
    HostConfig h;
    h.name = "host" + std::to_string(i);
    h.type = i % 4 == 0 ? "fast" : "";
    h.slots = 64;
    h.mem_mb = 256 * 1024;
    for (int g = 0; g < 8; ++g) h.gpus.push_back(g);
    h.resources["model"] = std::string(i % 2 ? "A100" : "H100");
    Must(s.AddHost(h));
  }
  QueueConfig normal{"normal"};
  normal.priority = 10;
  QueueConfig spread{"spread"};
  spread.balance = Balance::kSpread;
  spread.user_round_robin = true;
  Must(s.AddQueue(normal));
  Must(s.AddQueue(spread));

  const char* shapes[] = {"", "rusage[mem=1024]", "rusage[gpu=1]", "select[model==H100] rusage[mem=512]",
                          "span[hosts=1]"};
  std::mt19937 rng(42);
  for (int i = 0; i < jobs; ++i) {
    JobRequest r;
    r.id = i + 1;
    r.user = "user" + std::to_string(rng() % 50);
    r.queue = i % 3 == 0 ? "spread" : "normal";
    int shape = rng() % 5;
    r.slots = shape == 4 ? 4 : 1;
    r.requirement = *ParseRequirement(shapes[shape]);
    Must(s.Submit(r));
  }

  int total_placed = 0;
  double total_seconds = 0;
  int cycles = 0;
  while (s.pending() > 0 && cycles < 20) {
    CycleStats stats;
    auto start = std::chrono::steady_clock::now();
    auto placed = s.Cycle(&stats);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    total_placed += stats.placed;
    total_seconds += secs;
    ++cycles;
    std::printf("cycle %d: placed %d of %d considered in %.3f s (%.0f placements/s, %d skipped "
                "as already-failed shapes)\n",
                cycles, stats.placed, stats.considered, secs, stats.placed / secs,
                stats.skipped_by_cache);
    for (const auto& p : placed) Must(s.Release(p.job_id));  // the jobs finish; free the cluster
    if (stats.placed == 0) break;
  }
  std::printf("nexec scheduling: %d hosts, %d jobs: %d placements in %.3f s = %.0f decisions/s "
              "(target 50,000/s; SkyForm AIP claims 5,000/s)\n",
              hosts, jobs, total_placed, total_seconds, total_placed / total_seconds);
  return 0;
}
