#pragma once

// Containment of a nexec task in a cgroup of its own (issue 29 item 8; Slurm's
// proctrack/cgroup and task/cgroup are the anchor).
//
// A process group is a promise a task need not keep: `setsid`, a double fork or a daemon
// leaves it, and kill, suspend and GPU-misuse handling that follow the group miss what left.
// A cgroup is the kernel's: every process a task starts stays in the task's cgroup, which
// it cannot leave (its cgroup directories belong to root). So the agent
//   - puts each task in a cgroup of its own before it execs (the child joins it itself,
//     so nothing it forks is ever outside),
//   - suspends and resumes it with the freezer,
//   - kills it by freezing it, sending SIGKILL to every process in it, and thawing it,
//     until no process is left,
//   - limits its memory (rusage[mem=...]) and its number of processes (the queue's
//     pids_limit), binds it to its cores (cpuset: a task cannot widen its own affinity),
//     denies it the GPUs it does not hold (devices), and reads its usage from the cgroup.
// Under the unified hierarchy (cgroup v2) that is one directory with cgroup.freeze,
// memory.max, cpuset.cpus, pids.max and cgroup.kill, and devices are denied by a BPF
// program attached to it; under v1 one directory per controller (freezer, memory, pids,
// cpuacct, devices, cpuset, blkio) that this host mounts.

#include <sys/types.h>

#include <cstdint>

#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::nexec {

// Where this host's cgroups are and where the agent's own sit in them.
struct CgroupLayout {
  bool v2 = false;
  // v2: {"", <the agent's cgroup directory>}. v1: controller -> the agent's directory in
  // that controller's hierarchy (e.g. "memory" -> /sys/fs/cgroup/memory/system.slice/x).
  std::map<std::string, std::string> dirs;

  // From /proc/self/mountinfo and /proc/self/cgroup (`root` prefixes both, for tests over
  // a directory laid out like /proc and /sys/fs/cgroup). Unavailable when no usable
  // hierarchy is mounted (neither v2 nor a v1 freezer).
  static absl::StatusOr<CgroupLayout> Discover(const std::string& root = "");
  // For tests: a unified hierarchy at `dir`.
  static CgroupLayout Unified(const std::string& dir);
};

// A character device by its numbers (a GPU: /dev/nvidiaN is 195:N).
struct CharDevice {
  uint32_t major = 0;
  uint32_t minor = 0;
  bool operator==(const CharDevice&) const = default;
};

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0: none
  int64_t pids = 0;          // processes and threads at once; 0: none
  std::vector<int> cpus;     // the cores it may run on; empty: the agent's
  std::vector<CharDevice> denied_devices;  // devices it may not open (the GPUs it does not hold)
};

// What the task used since its cgroup was given to it.
struct CgroupUsage {
  double cpu_seconds = 0;
  int64_t memory_peak_bytes = 0;
  int64_t memory_bytes = 0;  // now: its processes' anonymous memory (RSS)
  int64_t swap_bytes = 0;
  int64_t read_bytes = 0;    // block IO (v1 blkio counts reads and direct writes; buffered
  int64_t write_bytes = 0;   // writes are charged when written back)
  int processes = 0;
  int threads = 0;
  bool oom_killed = false;  // the kernel killed a process of it for going over its memory limit
};

// v2: makes the tasks' directory below the agent's (`agent_dir`/nexec) and enables the
// controllers tasks are limited and measured with (memory, pids, cpu, cpuset, io) down to
// it; returns those it could not enable. A cgroup on the way that holds processes other
// than in leaves cannot pass controllers on ("no internal processes"): the agent belongs in
// a cgroup of its own (systemd: a service with Delegate=yes).
std::vector<std::string> PrepareTaskControllersV2(const std::string& agent_dir);

class TaskCgroup {
 public:
  // Makes the task's cgroup ("nexec/<name>" under the agent's own in every controller) and
  // applies `limits`. The files the child writes to join it are opened here, before a fork.
  static absl::StatusOr<std::unique_ptr<TaskCgroup>> Create(const CgroupLayout& layout, const std::string& name,
                                                            const CgroupLimits& limits);
  ~TaskCgroup();  // closes its files; the directories stay until Remove()

  // For the child between fork and exec (async-signal-safe): moves the calling process
  // into the cgroup. Returns 0, or -1 with errno set.
  int JoinFromChild() const;
  // Moves process `pid` into the cgroup (from the agent).
  absl::Status Add(pid_t pid) const;

  absl::Status Freeze();
  absl::Status Thaw();
  // Every process in the cgroup ends: frozen, SIGKILLed, thawed, until it is empty or
  // `attempts` rounds passed. Returns how many processes were still there at the start.
  absl::StatusOr<int> KillAll(int attempts = 50);
  std::vector<pid_t> Processes() const;
  CgroupUsage Usage() const { return Usage(nullptr); }
  // Usage() of a task that ended; when nothing is left in the cgroup, the totals read are
  // kept as the next task's starting point (Reset then reads none of them again).
  CgroupUsage FinalUsage();
  // For reuse by the next task (a cgroup made once costs milliseconds under v1; one reused,
  // microseconds): applies `limits` anew, and counts OOM kills and the peak from now on.
  absl::Status Reset(const CgroupLimits& limits);
  // rmdir of its directories (they must be empty of processes).
  absl::Status Remove();
  // The current task may leave cgroups below this one (a task in its image: runc's). Only
  // then are the directories below walked when it is listed, killed or reset; a task's
  // user cannot make cgroups here (the directories are root's).
  void set_nested() { nested_ = true; }

  const std::vector<std::string>& dirs() const { return dirs_; }
  int64_t memory_limit_bytes() const { return memory_limit_bytes_; }

 private:
  // Per controller, the directory that serves it (the same one under v2).
  struct Dirs {
    std::string freezer, memory, cpu, pids, cpuset, devices, io;
  };
  TaskCgroup(bool v2, std::vector<std::string> dirs, Dirs by_controller, std::vector<int> procs_fds);
  bool v2_;
  std::vector<std::string> dirs_;  // one per controller (v1) or the one (v2)
  Dirs c_;
  std::vector<int> procs_fds_;  // what the child writes itself into (v1: tasks, v2: cgroup.procs)
  std::vector<char> optional_;  // per dir: a v1 cpuset or devices hierarchy
  std::vector<char> skip_;      // per dir: not joined by the current task (Reset)
  // Files read for every task, by path, open from Create on (not changed after, so reads
  // from several threads need no lock).
  std::unordered_map<std::string, int> kept_;
  void KeepOpen();
  // A file of this cgroup's, from its start: through kept_, else by path.
  std::string Read(const std::string& path) const;
  // Writes a file of this cgroup's as the shell's `>` would: through kept_ where it is
  // kept writable, else by path.
  absl::Status Write(const std::string& path, const std::string& text);
  // True when its pids counter says it holds no process (v1 and v2 with the pids
  // controller); false when that cannot be told without the list.
  bool SurelyEmpty() const;
  int64_t memory_limit_bytes_ = 0;
  int64_t oom_kills_before_ = 0;  // the cumulative count when the current task got it
  // Counters that only grow, as they stood when the current task got the cgroup.
  double cpu_before_ = 0;
  int64_t read_before_ = 0, write_before_ = 0;
  int device_program_fd_ = -1;  // v2: the BPF program that denies devices, while attached
  std::vector<CharDevice> denied_;  // v1: what devices.deny holds for the current task
  bool nested_ = true;  // until Create's first Reset: a directory of a predecessor may have them
  // What is written in its files now, so that a reused cgroup rewrites only what the next
  // task changes (a cpuset write rebuilds the kernel's scheduling domains: it was a large
  // part of starting each task, perf, issue 32 item 6). Unset: not known, written.
  std::optional<int64_t> applied_memory_, applied_pids_;
  std::optional<std::string> applied_cpus_;
  bool has_memory_ = false, has_memsw_ = false, has_pids_ = false, has_cpuset_ = false;  // found at Create
  // The counters that only grow, as read together.
  struct Totals {
    int64_t oom_kills = 0;
    double cpu_seconds = 0;
    std::pair<int64_t, int64_t> io;
  };
  std::optional<Totals> end_totals_;  // set by FinalUsage of an emptied cgroup, until Reset
  bool has_oom_kill_count_ = false;  // v1: memory.oom_control counts oom_kill (kernels from 4.13)
  CgroupUsage Usage(Totals* totals) const;
  int64_t OomKills() const;
  double CpuSeconds() const;
  std::pair<int64_t, int64_t> IoBytes() const;  // read, written
  absl::Status DenyDevices(const std::vector<CharDevice>& devices);
  void RemoveBelow();
};

}  // namespace jc::nexec
