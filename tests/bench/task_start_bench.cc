// What containing a task in its cgroup costs at its start (issue 29 item 8: at most 5 ms
// more than the bare start). Starts `n` tasks of `/bin/true` one after the other, bare
// (a process group) and contained (a cgroup of its own in every controller), each waited
// for and reaped, and prints the mean wall time of a start-to-reaped cycle for each and
// their difference, from the same run.
//
//   build/tests/bench/task_start_bench [n=300]      (as root, on a host with cgroups)

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "executor/agent/task_cgroup.h"
#include "executor/agent/task_runner.h"

namespace {

double MeanMillis(jc::nexec::TaskRunner& runner, int n, const std::string& tag) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    jc::nexec::TaskLaunch t;
    t.key = tag + std::to_string(i);
    t.command = "true";
    auto pid = runner.Launch(t);
    if (!pid.ok()) {
      std::fprintf(stderr, "launch: %s\n", pid.status().ToString().c_str());
      std::exit(1);
    }
    while (runner.Reap().empty()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / n;
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
  const double b = MeanMillis(bare, n, "bare-");
  const double c = MeanMillis(contained, n, "cg-");
  std::printf("task start to reaped, mean of %d: bare %.2f ms, in a cgroup %.2f ms, difference %.2f ms (%zu "
              "controller(s)%s)\n",
              n, b, c, c - b, layout->dirs.size(), layout->v2 ? ", v2" : ", v1");
  return 0;
}
