// Task containment over a directory laid out like cgroupfs (SPEC B6, C6): discovery of the
// hierarchy from /proc/self/mountinfo and /proc/self/cgroup, and what a task's cgroup
// writes under the unified hierarchy (v2) — its memory limit, the freezer, kill and usage.
// The real v1 hierarchies of this project's machines are exercised by the nexec e2e test.

#include "executor/agent/task_cgroup.h"

#include <fcntl.h>
#include <sys/wait.h>

#include <cerrno>

#include "executor/agent/device_filter.h"

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
  // What the kernel would offer: the agent's directory gets every controller; nothing is
  // enabled below it yet.
  r.Write("agent/cgroup.controllers", "cpuset cpu io memory pids\n");
  r.Write("agent/cgroup.subtree_control", "");
  r.Write("agent/nexec/cgroup.controllers", "");
  r.Write("agent/nexec/cgroup.subtree_control", "");
  for (const char* f : {"cgroup.procs", "cgroup.freeze", "memory.max", "memory.swap.max", "pids.max", "cpuset.cpus"}) {
    r.Write(std::string("agent/nexec/42.0.1/") + f, "");
  }
  CgroupLimits limits;
  limits.memory_bytes = int64_t{4} << 30;
  limits.pids = 64;
  limits.cpus = {2, 3};
  auto cg = TaskCgroup::Create(CgroupLayout::Unified((r.dir / "agent").string()), "42.0.1", limits);
  INFO(cg.status().ToString());
  REQUIRE(cg.ok());
  // Enabled from the agent's directory down to the one that holds the tasks.
  CHECK(r.Read("agent/cgroup.subtree_control") == "+memory\n+pids\n+cpu\n+cpuset\n+io\n");
  CHECK(r.Read("agent/nexec/cgroup.subtree_control") == "");  // the fake kernel gave nexec/ none to pass on
  CHECK(r.Read("agent/nexec/42.0.1/pids.max") == "64");
  CHECK(r.Read("agent/nexec/42.0.1/cpuset.cpus") == "2,3");
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
  r.Write("agent/nexec/42.0.1/memory.stat", "anon 1048576\nfile 4096\n");
  r.Write("agent/nexec/42.0.1/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n");
  r.Write("agent/nexec/42.0.1/io.stat", "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2\n8:16 rbytes=100 wbytes=0\n");
  r.Write("agent/nexec/42.0.1/pids.current", "7\n");
  auto usage = (*cg)->Usage();
  CHECK(usage.cpu_seconds == Approx(2.5));
  CHECK(usage.memory_bytes == 1048576);
  CHECK(usage.read_bytes == 4196);
  CHECK(usage.write_bytes == 8192);
  CHECK(usage.processes == 2);
  CHECK(usage.threads == 7);
  CHECK(usage.memory_peak_bytes == 8388608);
  CHECK_FALSE(usage.oom_killed);
  r.Write("agent/nexec/42.0.1/memory.events", "low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\n");
  CHECK((*cg)->Usage().oom_killed);
  // Ended (its final usage): nothing in use any more, the peak and the totals kept.
  r.Write("agent/nexec/42.0.1/cgroup.procs", "");
  r.Write("agent/nexec/42.0.1/pids.current", "0\n");
  auto ended = (*cg)->Usage();
  CHECK(ended.processes == 0);
  CHECK(ended.threads == 0);
  CHECK(ended.memory_bytes == 0);
  CHECK(ended.memory_peak_bytes == 8388608);
  CHECK(ended.cpu_seconds == Approx(2.5));
  CHECK(ended.oom_killed);

  // Reused for the next task, it counts from there: what the last one used is not the
  // next one's.
  REQUIRE((*cg)->Reset(CgroupLimits{}).ok());
  CHECK(r.Read("agent/nexec/42.0.1/memory.max") == "max");
  CHECK(r.Read("agent/nexec/42.0.1/pids.max") == "max");
  r.Write("agent/nexec/42.0.1/cpu.stat", "usage_usec 3000000\n");
  r.Write("agent/nexec/42.0.1/io.stat", "8:0 rbytes=5000 wbytes=8192\n8:16 rbytes=100 wbytes=0\n");
  usage = (*cg)->Usage();
  CHECK(usage.cpu_seconds == Approx(0.5));
  CHECK(usage.read_bytes == 904);
  CHECK(usage.write_bytes == 0);

  // Killing uses the kernel's cgroup.kill where there is one (this fake kernel kills
  // nothing: the process stays, and KillAll says so).
  r.Write("agent/nexec/42.0.1/cgroup.kill", "");
  r.Write("agent/nexec/42.0.1/cgroup.procs", "101\n");
  CHECK_FALSE((*cg)->KillAll(1).ok());
  CHECK(r.Read("agent/nexec/42.0.1/cgroup.kill") == "1");
  // An empty cgroup (most tasks end with all their processes) is left as it is.
  r.Write("agent/nexec/42.0.1/cgroup.kill", "");
  r.Write("agent/nexec/42.0.1/cgroup.procs", "");
  auto killed = (*cg)->KillAll(1);
  REQUIRE(killed.ok());
  CHECK(*killed == 0);
  CHECK(r.Read("agent/nexec/42.0.1/cgroup.kill") == "");
}

TEST_CASE("under cgroup v2 where no controller reaches the tasks (a cgroup above holds processes), a task still "
          "runs contained and only a limit that needs one fails, saying why",
          "[B6][C6]") {
  // As on the GPU machine: the agent shares its cgroup with other processes, so the kernel
  // refuses to enable controllers below it and the tasks' directories have only the core files.
  Root r;
  r.Write("agent/cgroup.controllers", "cpuset cpu io memory pids\n");
  r.Write("agent/cgroup.subtree_control", "");
  r.Write("agent/nexec/cgroup.controllers", "");
  r.Write("agent/nexec/cgroup.subtree_control", "");
  for (const char* task : {"7.0.1", "7.0.2"}) {
    for (const char* f : {"cgroup.procs", "cgroup.freeze"}) r.Write(std::string("agent/nexec/") + task + "/" + f, "");
  }
  const auto missing = jc::nexec::PrepareTaskControllersV2((r.dir / "agent").string());
  CHECK(missing == std::vector<std::string>{"memory", "pids", "cpu", "cpuset", "io"});

  const auto layout = CgroupLayout::Unified((r.dir / "agent").string());
  auto plain = TaskCgroup::Create(layout, "7.0.1", CgroupLimits{});
  INFO(plain.status().ToString());
  REQUIRE(plain.ok());
  REQUIRE((*plain)->Freeze().ok());
  CHECK(r.Read("agent/nexec/7.0.1/cgroup.freeze") == "1");

  CgroupLimits memory;
  memory.memory_bytes = int64_t{1} << 30;
  auto limited = TaskCgroup::Create(layout, "7.0.2", memory);
  REQUIRE_FALSE(limited.ok());
  CHECK_THAT(std::string(limited.status().message()), Catch::Contains("no memory controller"));
}

TEST_CASE("under cgroup v2 a BPF device filter denies a task the devices it does not hold, and nothing else",
          "[B6][C6]") {
  // The unified hierarchy this host mounts (beside its v1 controllers: a hybrid host
  // checks both); a real kernel decides, so this needs root.
  const std::string unified = fs::exists("/sys/fs/cgroup/unified/cgroup.procs") ? "/sys/fs/cgroup/unified"
                              : fs::exists("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup"
                                                                                 : "";
  if (geteuid() != 0 || unified.empty()) {
    WARN("needs root and a cgroup2 mount: not checked here");
    return;
  }
  const std::string dir = unified + "/jc-device-filter-" + std::to_string(getpid());
  fs::create_directories(dir);
  // /dev/full (1:7) stands for a GPU the task does not hold; /dev/zero (1:5) for anything else.
  auto program = jc::nexec::LoadDeviceFilter({{1, 7}});
  INFO(program.status().ToString());
  REQUIRE(program.ok());
  REQUIRE(jc::nexec::AttachDeviceFilter(dir, *program).ok());
  auto opens_in_cgroup = [&](const char* path) {
    pid_t child = fork();
    if (child == 0) {
      std::ofstream(dir + "/cgroup.procs") << "0\n";
      int fd = open(path, O_RDONLY);
      _exit(fd >= 0 ? 0 : (errno == EPERM ? 1 : 2));
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WEXITSTATUS(status);
  };
  CHECK(opens_in_cgroup("/dev/full") == 1);  // EPERM
  CHECK(opens_in_cgroup("/dev/zero") == 0);
  REQUIRE(jc::nexec::DetachDeviceFilter(dir, *program).ok());
  CHECK(opens_in_cgroup("/dev/full") == 0);  // detached: allowed again
  close(*program);
  CHECK(rmdir(dir.c_str()) == 0);
}
