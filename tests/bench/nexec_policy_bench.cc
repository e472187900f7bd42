// Benchmark of issue 15 (SPEC B12): the executor's scheduler with every sharing policy on,
// at center scale — 8,000 hosts x 64 cores (512,000 cores), 1,000,000 pending jobs from
// 5,000 users in a two-level fair-share tree (50 departments x 100 users), limits per user
// and per project, backfill in the fair-share queue (every job has a run limit), and a
// preemptive queue over it that gets jobs once the cluster is full. Full cycles: each
// places what fits; then a tenth of the running jobs end and the next cycle runs.
// Prints decisions per second, the time of a full cycle and the process's memory.
// Asserts nothing.
//   build/tests/bench/nexec_policy_bench [hosts=8000] [jobs=1000000] [cycles=6] [urgent=1000]

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "executor/policy/scheduler.h"

using namespace jc::nexec;

namespace {

void Must(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "setup failed: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

double RssMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024;
  }
  return 0;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  const int hosts = argc > 1 ? std::atoi(argv[1]) : 8000;
  const int jobs = argc > 2 ? std::atoi(argv[2]) : 1000000;
  const int max_cycles = argc > 3 ? std::atoi(argv[3]) : 6;
  const int urgent_jobs = argc > 4 ? std::atoi(argv[4]) : 1000;
  const int departments = 50, users_per_department = 100;
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);

  Scheduler s;
  for (int i = 0; i < hosts; ++i) {
    HostConfig h;
    h.name = "host" + std::to_string(i);
    h.slots = 64;
    h.mem_mb = 512 * 1024;
    Must(s.AddHost(h));
  }
  FairshareConfig fs;
  fs.half_life = absl::Hours(5);
  for (int d = 0; d < departments; ++d) {
    ShareNode dept{"dept" + std::to_string(d), static_cast<double>(1 + d % 5), {}};
    for (int u = 0; u < users_per_department; ++u) {
      dept.children.push_back({"user" + std::to_string(d * users_per_department + u), static_cast<double>(1 + u % 3), {}});
    }
    fs.tree.push_back(std::move(dept));
  }
  QueueConfig fair{"fair"};
  fair.priority = 10;
  fair.fairshare = fs;
  fair.backfill = true;
  Must(s.AddQueue(fair));
  QueueConfig urgent{"urgent"};
  urgent.priority = 50;
  urgent.preempt = {"fair"};
  Must(s.AddQueue(urgent));

  LimitConfig per_user;
  per_user.name = "per_user";
  per_user.users = ParseConsumers("all", /*per=*/true);
  per_user.slots = *ParseLimitValue("200");
  LimitConfig per_project;
  per_project.name = "per_project";
  per_project.projects = ParseConsumers("all", /*per=*/true);
  per_project.slots = *ParseLimitValue("60000");
  s.SetLimits({per_user, per_project});
  s.SetLimitTime(t0, absl::UTCTimeZone());
  s.SetNow(t0);
  s.AdvanceFairshare(t0);

  const char* shapes[] = {"", "rusage[mem=2048]", "span[hosts=1]"};
  std::mt19937 rng(42);
  auto setup_start = std::chrono::steady_clock::now();
  for (int i = 0; i < jobs; ++i) {
    JobRequest r;
    r.id = i + 1;
    const int user = static_cast<int>(rng() % (departments * users_per_department));
    r.user = "user" + std::to_string(user);
    r.project = "p" + std::to_string(user % 10);
    r.queue = "fair";
    const int shape = rng() % 10 < 7 ? 0 : (rng() % 3 == 0 ? 2 : 1);
    r.slots = shape == 2 ? 4 : 1;
    r.requirement = *ParseRequirement(shapes[shape]);
    r.run_limit = absl::Minutes(10 + static_cast<int>(rng() % 110));
    Must(s.Submit(r));
  }
  const double setup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
  std::printf("setup: %d hosts (%d cores), %d pending jobs from %d users in %d departments, in %.1f s; RSS %.0f MiB\n",
              hosts, hosts * 64, jobs, departments * users_per_department, departments, setup_seconds, RssMiB());

  int64_t total_placed = 0, total_preempted = 0, total_backfilled = 0;
  double total_seconds = 0, longest = 0;
  int64_t next_id = jobs + 1;
  std::vector<int64_t> running;
  absl::Time now = t0;
  const double cpu_start = CpuSeconds();
  for (int cycle = 1; cycle <= max_cycles && s.pending() > 0; ++cycle) {
    if (cycle == 3) {
      // The cluster is full: more urgent work arrives than the slots that free up, and
      // preempts for the rest.
      for (int k = 0; k < urgent_jobs; ++k) {
        JobRequest r;
        r.id = next_id++;
        r.user = "oncall" + std::to_string(k % 50);  // holding nothing yet: no limit stops them
        r.queue = "urgent";
        r.slots = 1;
        Must(s.Submit(r));
      }
    }
    now += absl::Minutes(1);
    s.SetNow(now);
    s.SetLimitTime(now, absl::UTCTimeZone());
    CycleStats stats;
    auto start = std::chrono::steady_clock::now();
    s.AdvanceFairshare(now);
    std::vector<Placement> placed = s.Cycle(&stats);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto preempted = s.TakePreemptions();
    const auto resumed = s.TakeResumes();
    total_placed += stats.placed;
    total_preempted += static_cast<int64_t>(preempted.size());
    total_backfilled += stats.backfilled;
    total_seconds += secs;
    longest = std::max(longest, secs);
    std::printf("cycle %d: placed %d (%d backfilled) of %d considered, %zu preempted, %zu resumed, in %.3f s "
                "(%.0f decisions/s), %zu running, %zu pending\n",
                cycle, stats.placed, stats.backfilled, stats.considered, preempted.size(), resumed.size(), secs,
                stats.placed / std::max(secs, 1e-9), running.size() + placed.size(), s.pending());
    for (const auto& p : placed) running.push_back(p.job_id);
    // Preempted jobs are suspended by the master; here they simply stay lent.
    // A tenth of the running jobs end (the oldest first).
    const size_t ending = running.size() / 10;
    for (size_t k = 0; k < ending; ++k) Must(s.Release(running[k]));
    running.erase(running.begin(), running.begin() + static_cast<long>(ending));
  }
  const double cpu = CpuSeconds() - cpu_start;
  std::printf("nexec policies: %d hosts (%d cores), %d jobs, %d users, fair share + limits + backfill + preemption: "
              "%lld placements in %.2f s of cycles = %.0f decisions/s (target 100,000/s); longest full cycle %.2f s; "
              "%lld backfilled, %lld preempted; CPU %.2f us per placement; RSS %.0f MiB\n",
              hosts, hosts * 64, jobs, departments * users_per_department, static_cast<long long>(total_placed),
              total_seconds, total_placed / total_seconds, longest, static_cast<long long>(total_backfilled),
              static_cast<long long>(total_preempted), cpu * 1e6 / std::max<int64_t>(total_placed, 1), RssMiB());
  return 0;
}
