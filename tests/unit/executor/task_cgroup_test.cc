// Task containment over a directory laid out like cgroupfs (SPEC B6, C6): discovery of the
// hierarchy from /proc/self/mountinfo and /proc/self/cgroup, and what a task's cgroup
// writes under the unified hierarchy (v2) — its memory limit, the freezer, kill and usage.
// The real v1 hierarchies of this project's machines are exercised by the nexec e2e test.

#include "executor/agent/task_cgroup.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using jc::nexec::CgroupLayout;
using jc::nexec::CgroupLimits;
using jc::nexec::TaskCgroup;

namespace {

struct Root {
  fs::path dir = fs::temp_directory_path() / ("jc-cgroupfs-" + std::to_string(getpid()));
  Root() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Root() { fs::remove_all(dir); }
  void Write(const std::string& rel, const std::string& text) const {
    fs::create_directories((dir / rel).parent_path());
    std::ofstream(dir / rel) << text;
  }
  std::string Read(const std::string& rel) const {
    std::ifstream in(dir / rel);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

}  // namespace

TEST_CASE("the cgroup hierarchy is found from mountinfo and the process's cgroup: v1 controllers where the freezer "
          "is mounted, else the unified one",
          "[B6][C6]") {
  Root r;
  r.Write("proc/self/mountinfo",
          "30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
          "31 30 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
          "32 30 0:28 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n"
          "33 30 0:29 /outer /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
          "34 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
  r.Write("proc/self/cgroup", "5:freezer:/agents/a1\n4:memory:/outer/agents/a1\n3:cpu,cpuacct:/agents/a1\n0::/x\n");
  auto v1 = CgroupLayout::Discover(r.dir.string());
  REQUIRE(v1.ok());
  CHECK_FALSE(v1->v2);
  CHECK(v1->dirs.at("freezer") == (r.dir / "sys/fs/cgroup/freezer/agents/a1").string());
  // The memory hierarchy is mounted from /outer: the path is below the mount's root.
  CHECK(v1->dirs.at("memory") == (r.dir / "sys/fs/cgroup/memory/agents/a1").string());
  CHECK(v1->dirs.at("cpuacct") == (r.dir / "sys/fs/cgroup/cpu,cpuacct/agents/a1").string());
  CHECK(v1->dirs.count("pids") == 0);  // not mounted here

  r.Write("proc/self/mountinfo", "31 25 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  r.Write("proc/self/cgroup", "0::/system.slice/nexec-agent.service\n");
  auto v2 = CgroupLayout::Discover(r.dir.string());
  REQUIRE(v2.ok());
  CHECK(v2->v2);
  CHECK(v2->dirs.at("") == (r.dir / "sys/fs/cgroup/system.slice/nexec-agent.service").string());

  r.Write("proc/self/mountinfo", "30 25 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n");
  r.Write("proc/self/cgroup", "");
  auto none = CgroupLayout::Discover(r.dir.string());
  CHECK(absl::IsUnavailable(none.status()));
}

TEST_CASE("under cgroup v2 a task's cgroup gets its memory limit, freezes and thaws, and its usage and OOM kills are "
          "read from it",
          "[B6][C6]") {
  Root r;
  // What the kernel would offer: controllers available below the agent's directory.
  r.Write("agent/nexec/cgroup.controllers", "cpuset cpu io memory pids\n");
  r.Write("agent/nexec/cgroup.subtree_control", "");
  for (const char* f : {"cgroup.procs", "cgroup.freeze", "memory.max", "memory.swap.max", "pids.max"}) {
    r.Write(std::string("agent/nexec/42.0.1/") + f, "");
  }
  CgroupLimits limits;
  limits.memory_bytes = int64_t{4} << 30;
  auto cg = TaskCgroup::Create(CgroupLayout::Unified((r.dir / "agent").string()), "42.0.1", limits);
  INFO(cg.status().ToString());
  REQUIRE(cg.ok());
  CHECK(r.Read("agent/nexec/cgroup.subtree_control") == "+memory +pids +cpu");
  CHECK(r.Read("agent/nexec/42.0.1/memory.max") == std::to_string(int64_t{4} << 30));
  CHECK(r.Read("agent/nexec/42.0.1/memory.swap.max") == "0");
  CHECK((*cg)->memory_limit_bytes() == int64_t{4} << 30);
  REQUIRE((*cg)->Freeze().ok());
  CHECK(r.Read("agent/nexec/42.0.1/cgroup.freeze") == "1");
  REQUIRE((*cg)->Thaw().ok());
  CHECK(r.Read("agent/nexec/42.0.1/cgroup.freeze") == "0");

  r.Write("agent/nexec/42.0.1/cgroup.procs", "101\n102\n");
  CHECK((*cg)->Processes() == std::vector<pid_t>{101, 102});
  r.Write("agent/nexec/42.0.1/cpu.stat", "usage_usec 2500000\nuser_usec 2000000\n");
  r.Write("agent/nexec/42.0.1/memory.current", "1048576\n");
  r.Write("agent/nexec/42.0.1/memory.peak", "8388608\n");
  r.Write("agent/nexec/42.0.1/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n");
  auto usage = (*cg)->Usage();
  CHECK(usage.cpu_seconds == Approx(2.5));
  CHECK(usage.memory_bytes == 1048576);
  CHECK(usage.memory_peak_bytes == 8388608);
  CHECK_FALSE(usage.oom_killed);
  r.Write("agent/nexec/42.0.1/memory.events", "low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\n");
  CHECK((*cg)->Usage().oom_killed);

  // Killing uses the kernel's cgroup.kill where there is one.
  r.Write("agent/nexec/42.0.1/cgroup.kill", "");
  r.Write("agent/nexec/42.0.1/cgroup.procs", "");
  auto killed = (*cg)->KillAll(1);
  REQUIRE(killed.ok());
  CHECK(r.Read("agent/nexec/42.0.1/cgroup.kill") == "1");
}
