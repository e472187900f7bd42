// What containing a task in its cgroup costs at its start (issue 29 item 8: at most 5 ms
// more than the bare start). Starts `n` tasks of `/bin/true` one after the other, bare
// (a process group) and contained (a cgroup of its own in every controller), each waited
// for and reaped, and prints the mean wall time of a start-to-reaped cycle for each and
// their difference, from the same run.
//
// With `image` (issue 30: a warm start in an image at most 150 ms more than bare), it also
// starts a registry (docker-registry, TLS, credentials), pushes a busybox image, and times
// the first task in it (the pull and unpack included) and then `n`/10 more (the image in
// the agent's store), each `true` under runc in the task's cgroup, against the contained
// bare start of the same run.
//
// With `image burst [pad_mb]`, also 64 tasks at once over 16 agents' runners (each its
// own cgroup directory and image store, as 16 hosts would have; here they share this
// host's cores): the time from the first launch until all 64 ended, bare, in the image
// with every store empty (16 pulls; the other 48 tasks wait for their host's), and again
// with the stores filled. `pad_mb` makes the image that much bigger (random data: a
// framework-sized cold pull).
//
//   build/tests/bench/task_start_bench [n=300] [image [burst [pad_mb]]]   (as root, with cgroups)

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <thread>

#include "executor/agent/task_cgroup.h"
#include "executor/agent/task_runner.h"
#include "tests/testing/oci_registry.h"

namespace {

double MeanMillis(jc::nexec::TaskRunner& runner, int n, const std::string& tag, const std::string& image = "") {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    jc::nexec::TaskLaunch t;
    t.key = tag + std::to_string(i);
    t.command = "true";
    t.image = image;
    auto pid = runner.Launch(t);
    if (!pid.ok()) {
      std::fprintf(stderr, "launch: %s\n", pid.status().ToString().c_str());
      std::exit(1);
    }
    std::vector<jc::nexec::TaskExit> ended;
    while ((ended = runner.Reap()).empty()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (ended[0].exit_code != 0) {
      std::fprintf(stderr, "task %s ended %d %s\n", t.key.c_str(), ended[0].exit_code, ended[0].killed_because.c_str());
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / n;
}

// CPU seconds (user + system) of this process's reaped children so far.
double ChildCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// CPU per task, the tasks' own (from clone to exit: what the child does before exec
// included) and the runner's (this process: launch, reap, cgroup reads and writes), in
// microseconds, around `run`.
template <class F>
std::pair<double, double> CpuPerTask(int n, F run) {
  const double child = ChildCpuSeconds(), self = SelfCpuSeconds();
  run();
  return {(ChildCpuSeconds() - child) * 1e6 / n, (SelfCpuSeconds() - self) * 1e6 / n};
}

// Launches `tasks` tasks round robin over `runners` at once and waits until all ended;
// returns the milliseconds from the first launch to the last exit.
double BurstMillis(std::vector<std::unique_ptr<jc::nexec::TaskRunner>>& runners, int tasks, const std::string& tag,
                   const std::string& image) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < tasks; ++i) {
    jc::nexec::TaskLaunch t;
    t.key = tag + std::to_string(i);
    t.command = "true";
    t.image = image;
    auto pid = runners[i % runners.size()]->Launch(t);
    if (!pid.ok()) {
      std::fprintf(stderr, "launch: %s\n", pid.status().ToString().c_str());
      std::exit(1);
    }
  }
  int ended = 0;
  while (ended < tasks) {
    bool any = false;
    for (auto& r : runners) {
      for (const auto& e : r->Reap()) {
        any = true;
        ++ended;
        if (e.exit_code != 0) {
          std::fprintf(stderr, "task %s ended %d %s\n", e.key.c_str(), e.exit_code, e.killed_because.c_str());
          std::exit(1);
        }
      }
    }
    if (!any) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 300;
  jc::nexec::TaskRunner bare;
  auto layout = jc::nexec::CgroupLayout::Discover();
  if (!layout.ok()) {
    std::fprintf(stderr, "no cgroups here: %s\n", layout.status().ToString().c_str());
    return 1;
  }
  for (auto& [controller, dir] : layout->dirs) dir += "/nexec/bench." + std::to_string(getpid());
  jc::nexec::TaskRunner contained;
  contained.ContainIn(*layout);
  MeanMillis(bare, 20, "warm-bare-");
  MeanMillis(contained, 20, "warm-cg-");
  double b = 0, c = 0;
  const auto bare_cpu = CpuPerTask(n, [&] { b = MeanMillis(bare, n, "bare-"); });
  const auto contained_cpu = CpuPerTask(n, [&] { c = MeanMillis(contained, n, "cg-"); });
  std::printf("task start to reaped, mean of %d: bare %.2f ms, in a cgroup %.2f ms, difference %.2f ms (%zu "
              "controller(s)%s)\n",
              n, b, c, c - b, layout->dirs.size(), layout->v2 ? ", v2" : ", v1");
  std::printf("CPU per task: bare %.0f us in the task, %.0f us in the runner; in a cgroup %.0f us in the task, "
              "%.0f us in the runner (the runner's includes its polling for the exit)\n",
              bare_cpu.first, bare_cpu.second, contained_cpu.first, contained_cpu.second);
  if (argc > 2 && std::string(argv[2]) == "image") {
    const std::string dir = "/tmp/jc-image-bench-" + std::to_string(getpid());
    auto registry = jc::testing::OciRegistry::Start(dir + "/registry", JC_SOURCE_DIR);
    if (!registry.ok()) {
      std::fprintf(stderr, "registry: %s\n", registry.status().ToString().c_str());
      return 1;
    }
    const bool burst = argc > 3 && std::string(argv[3]) == "burst";
    const int pad_mb = argc > 4 ? std::atoi(argv[4]) : 0;
    if (pad_mb > 0) setenv("JC_IMAGE_PAD_MB", std::to_string(pad_mb).c_str(), 1);
    auto digest = (*registry)->Push("bench/busybox", "v1", "bench");
    if (!digest.ok()) {
      std::fprintf(stderr, "push: %s\n", digest.status().ToString().c_str());
      return 1;
    }
    jc::nexec::ImageRunning images;
    images.runner = JC_IMAGE_RUNNER;
    images.store = dir + "/store";
    images.auth_file = (*registry)->auth_file();
    images.cert_dir = dir + "/registry/ca";
    std::filesystem::create_directories(images.store);
    contained.RunImagesWith(images);
    const std::string ref = (*registry)->host() + "/bench/busybox@" + *digest;
    const double cold = MeanMillis(contained, 1, "cold-", ref);
    const int m = std::max(10, n / 10);
    const double warm = MeanMillis(contained, m, "image-", ref);
    std::printf("in its image (runc): first task %.1f ms (pull and unpack included), then mean of %d %.1f ms: "
                "%.1f ms more than contained bare\n",
                cold, m, warm, warm - c);
    if (burst) {
      constexpr int kAgents = 16, kTasks = 64;
      std::vector<std::unique_ptr<jc::nexec::TaskRunner>> runners;
      for (int k = 0; k < kAgents; ++k) {
        auto agent_layout = *layout;
        for (auto& [controller, d] : agent_layout.dirs) d += "." + std::to_string(k);
        auto r = std::make_unique<jc::nexec::TaskRunner>();
        r->ContainIn(agent_layout);
        jc::nexec::ImageRunning own = images;
        own.store = dir + "/store-" + std::to_string(k);
        std::filesystem::create_directories(own.store);
        r->RunImagesWith(own);
        runners.push_back(std::move(r));
      }
      double cpu = ChildCpuSeconds();
      const double bare_burst = BurstMillis(runners, kTasks, "burst-bare-", "");
      const double bare_cpu = (ChildCpuSeconds() - cpu) * 1000 / kTasks;
      cpu = ChildCpuSeconds();
      const double cold_burst = BurstMillis(runners, kTasks, "burst-cold-", ref);
      const double cold_cpu = (ChildCpuSeconds() - cpu) * 1000 / kTasks;
      cpu = ChildCpuSeconds();
      const double warm_burst = BurstMillis(runners, kTasks, "burst-warm-", ref);
      const double warm_cpu = (ChildCpuSeconds() - cpu) * 1000 / kTasks;
      std::printf("%d tasks at once over %d agents (image %s%d MB of padding): all ended after bare %.0f ms, in the "
                  "image with empty stores %.0f ms (%d pulls), with filled stores %.0f ms: %.0f ms more than bare\n",
                  kTasks, kAgents, pad_mb > 0 ? "with " : "", pad_mb, bare_burst, cold_burst, kAgents, warm_burst,
                  warm_burst - bare_burst);
      std::printf("CPU per task (its processes, runner, skopeo, umoci and runc included): bare %.1f ms, cold %.1f ms, "
                  "warm %.1f ms; %u core(s) here\n",
                  bare_cpu, cold_cpu, warm_cpu, std::thread::hardware_concurrency());
    }
    std::filesystem::remove_all(dir);
  }
  return 0;
}
