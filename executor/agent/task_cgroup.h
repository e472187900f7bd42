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
//   - limits its memory (rusage[mem=...]) and reads its usage from the cgroup.
// Under the unified hierarchy (cgroup v2) that is one directory with cgroup.freeze,
// memory.max and cgroup.kill; under v1 one directory per controller (freezer, memory,
// pids, cpuacct, devices) that this host mounts.

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
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

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0: none
  int64_t pids = 0;          // 0: none
};

struct CgroupUsage {
  double cpu_seconds = 0;
  int64_t memory_peak_bytes = 0;
  int64_t memory_bytes = 0;
  bool oom_killed = false;  // the kernel killed a process of it for going over its memory limit
};

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
  CgroupUsage Usage() const;
  // For reuse by the next task (a cgroup made once costs milliseconds under v1; one reused,
  // microseconds): applies `limits` anew, and counts OOM kills and the peak from now on.
  absl::Status Reset(const CgroupLimits& limits);
  // rmdir of its directories (they must be empty of processes).
  absl::Status Remove();

  const std::vector<std::string>& dirs() const { return dirs_; }
  int64_t memory_limit_bytes() const { return memory_limit_bytes_; }

 private:
  TaskCgroup(bool v2, std::vector<std::string> dirs, std::string freezer, std::string memory, std::string cpu,
             std::vector<int> procs_fds);
  bool v2_;
  std::vector<std::string> dirs_;  // one per controller (v1) or the one (v2)
  std::string freezer_dir_, memory_dir_, cpu_dir_, pids_dir_;
  std::vector<int> procs_fds_;  // cgroup.procs of each, opened for the child
  int64_t memory_limit_bytes_ = 0;
  int64_t oom_kills_before_ = 0;  // the cumulative count when the current task got it
  int64_t OomKills() const;
  absl::Status ApplyLimits(const CgroupLimits& limits);
};

}  // namespace jc::nexec
