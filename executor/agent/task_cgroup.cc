#include "executor/agent/task_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "executor/agent/vfork_child.h"
#include "executor/agent/device_filter.h"

namespace jc::nexec {
namespace {

namespace fs = std::filesystem;

// The v1 controllers a task's cgroup is made in (those this host mounts). The freezer is
// the one containment needs; the others limit and measure.
constexpr const char* kV1Controllers[] = {"freezer", "memory", "pids", "cpuacct", "devices", "cpuset", "blkio"};
// What v2 tasks' cgroups get from their parents (cgroup.subtree_control).
constexpr const char* kV2Controllers[] = {"memory", "pids", "cpu", "cpuset", "io"};

// All of an open file from its start (a cgroup file is made anew by each read from 0).
// `one_record`: a file the kernel makes as one record (every file KeepOpen keeps: a counter,
// a statistics table, a peak; not the lists of processes, cgroup.procs and tasks, a record
// a process). A read of such a file answers all of it that fits in the buffer (seq_file),
// so a read that did not fill the buffer had all of it, and no second read is made to find
// the end: the agent reads five such files at each task's end, and that second read was a
// system call through kernfs's locking each (perf, issue 48: half the agent's 10 preads a
// task). systemd's read_virtual_file reads them in one read as well.
std::string ReadFrom(int fd, bool one_record = false) {
  std::string out;
  char buf[4096];
  for (off_t at = 0;;) {
    const ssize_t n = pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (one_record && static_cast<size_t>(n) < sizeof buf) break;
    at += n;
  }
  return out;
}

std::string ReadText(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string();
  std::string out = ReadFrom(fd);
  close(fd);
  return out;
}

// As the shell's `>` (`>>` with `append`), which is how cgroup files are written.
absl::Status WriteText(const std::string& path, const std::string& text, bool append = false) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | (append ? O_APPEND : O_TRUNC));
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return absl::InternalError(absl::StrCat("cannot write \"", text, "\" to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

int64_t NumberIn(absl::string_view text) {
  int64_t v = 0;
  (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &v);
  return v;
}

// A "key value" line of a flat-keyed cgroup file's text (memory.stat, memory.events, cpu.stat).
int64_t KeyedValue(absl::string_view text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t v = 0;
    if (f.size() == 2 && f[0] == key && absl::SimpleAtoi(f[1], &v)) return v;
  }
  return 0;
}


// The numbers of "x y" pairs in a file's text of lines "<dev> key=value ..." (v2 io.stat) or
// "<dev> Key value" (v1 blkio.throttle.io_service_bytes), summed over devices.
int64_t SumOverDevices(absl::string_view text, absl::string_view key) {
  int64_t total = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() == 3 && f[1] == key) {  // v1: "8:0 Read 4096"
      int64_t v = 0;
      if (absl::SimpleAtoi(f[2], &v)) total += v;
      continue;
    }
    for (size_t i = 1; i < f.size(); ++i) {  // v2: "8:0 rbytes=4096 wbytes=0 ..."
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(f[i], absl::MaxSplits('=', 1));
      int64_t v = 0;
      if (kv.first == key && absl::SimpleAtoi(kv.second, &v)) total += v;
    }
  }
  return total;
}

int LinesIn(absl::string_view text) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) n += !line.empty();
  return n;
}

std::string JoinCpus(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) absl::StrAppend(&out, out.empty() ? "" : ",", c);
  return out;
}

// v1 cpuset: a new cgroup has no cores and no memory nodes, and no process can join it
// until it has. Each directory from the first that has them down to `dir` gets its
// parent's.
absl::Status InheritCpuset(const std::string& dir) {
  // Tasks start concurrently: one filling a directory (cores written, memory nodes not
  // yet) must not be taken by another for filled, which would copy its empty nodes down
  // (and every join there would fail with ENOSPC).
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto filled = [](const fs::path& p) {
    return !absl::StripAsciiWhitespace(ReadText((p / "cpuset.cpus").string())).empty() &&
           !absl::StripAsciiWhitespace(ReadText((p / "cpuset.mems").string())).empty();
  };
  std::vector<fs::path> empty;
  for (fs::path p = dir; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (!fs::exists(p / "cpuset.cpus")) break;
    if (filled(p)) break;
    empty.push_back(p);
  }
  for (auto it = empty.rbegin(); it != empty.rend(); ++it) {
    for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
      std::string value(absl::StripAsciiWhitespace(ReadText((it->parent_path() / file).string())));
      JC_RETURN_IF_ERROR(WriteText((*it / file).string(), value));
    }
  }
  return absl::OkStatus();
}

// v2: a controller reaches a cgroup only through every parent's subtree_control. From
// `dir` up to the first directory that already gets all of them (or the root), each one
// enables them for its children, top down. A directory that holds processes cannot (the
// agent moves itself into a leaf of its own at start: Agent::ContainTasks).
void EnableControllers(const std::string& dir) {
  auto words = [](const std::string& text) {
    std::vector<std::string> out = absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    return out;
  };
  auto has_all = [&](const fs::path& p) {
    const std::vector<std::string> have = words(ReadText((p / "cgroup.controllers").string()));
    for (const char* c : kV2Controllers) {
      if (std::find(have.begin(), have.end(), c) == have.end()) return false;
    }
    return true;
  };
  std::vector<fs::path> chain;
  for (fs::path p = dir;; p = p.parent_path()) {
    chain.push_back(p);
    if (has_all(p) || !fs::exists(p.parent_path() / "cgroup.controllers") || p == p.parent_path()) break;
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const std::vector<std::string> have = words(ReadText((*it / "cgroup.controllers").string()));
    const std::vector<std::string> on = words(ReadText((*it / "cgroup.subtree_control").string()));
    for (const char* c : kV2Controllers) {
      // One at a time: a controller the kernel refuses here leaves the others enabled.
      if (std::find(have.begin(), have.end(), c) != have.end() && std::find(on.begin(), on.end(), c) == on.end()) {
        (void)WriteText((*it / "cgroup.subtree_control").string(), absl::StrCat("+", c, "\n"), /*append=*/true);
      }
    }
  }
}

}  // namespace

std::vector<std::string> PrepareTaskControllersV2(const std::string& agent_dir) {
  const std::string tasks = agent_dir + "/nexec";
  std::error_code ec;
  fs::create_directories(tasks, ec);
  EnableControllers(tasks);
  std::vector<std::string> on =
      absl::StrSplit(ReadText(tasks + "/cgroup.subtree_control"), absl::ByAnyChar(" \n"), absl::SkipEmpty());
  std::vector<std::string> missing;
  for (const char* c : kV2Controllers) {
    if (std::find(on.begin(), on.end(), c) == on.end()) missing.push_back(c);
  }
  return missing;
}

CgroupLayout CgroupLayout::Unified(const std::string& dir) {
  CgroupLayout l;
  l.v2 = true;
  l.dirs[""] = dir;
  return l;
}

absl::StatusOr<CgroupLayout> CgroupLayout::Discover(const std::string& root) {
  // Mounts: cgroup (v1: its controllers in the super options) and cgroup2.
  struct Mount {
    std::string root, point;
  };
  std::map<std::string, Mount> v1;  // controller -> mount
  std::optional<Mount> unified;
  for (absl::string_view line : absl::StrSplit(ReadText(root + "/proc/self/mountinfo"), '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || dash + 3 > f.end()) continue;
    const std::string& type = *(dash + 1);
    const Mount m{f[3], root + f[4]};
    if (type == "cgroup2") {
      if (!unified) unified = m;
    } else if (type == "cgroup") {
      for (absl::string_view opt : absl::StrSplit(*(dash + 3), ',')) v1.emplace(std::string(opt), m);
    }
  }
  // Where this process is in each hierarchy.
  std::map<std::string, std::string> paths;  // controller ("" for v2) -> path
  for (absl::string_view line : absl::StrSplit(ReadText(root + "/proc/self/cgroup"), '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    for (absl::string_view c : absl::StrSplit(f[1], ',')) paths[std::string(c)] = f[2];
  }
  auto place = [](const Mount& m, std::string path) {
    // The mount shows the hierarchy from its root on: a path below it is relative to that.
    if (m.root != "/" && absl::StartsWith(path, m.root)) path = path.substr(m.root.size());
    return (fs::path(m.point) / fs::path(path).relative_path()).lexically_normal().string();
  };
  CgroupLayout l;
  if (v1.count("freezer") && paths.count("freezer")) {
    for (const char* c : kV1Controllers) {
      if (v1.count(c) && paths.count(c)) l.dirs[c] = place(v1.at(c), paths.at(c));
    }
    return l;
  }
  if (unified && paths.count("")) {
    l.v2 = true;
    l.dirs[""] = place(*unified, paths.at(""));
    return l;
  }
  return absl::UnavailableError("no cgroup hierarchy to contain tasks in (neither cgroup v2 nor a v1 freezer is mounted)");
}

absl::StatusOr<std::unique_ptr<TaskCgroup>> TaskCgroup::Create(const CgroupLayout& layout, const std::string& name,
                                                               const CgroupLimits& limits) {
  std::vector<std::string> dirs;
  std::vector<char> optional;  // per dir: joined only when the task needs its controller
  Dirs c;
  std::error_code ec;
  if (layout.v2) {
    const std::string base = layout.dirs.at("");
    // Tasks live in nexec/ below the agent's directory: v2 enables controllers only for
    // directories without processes of their own.
    const std::string dir = base + "/nexec/" + name;
    if (!fs::create_directories(dir, ec) && ec) {
      return absl::UnavailableError(absl::StrCat("cannot create the task's cgroup ", dir, ": ", ec.message()));
    }
    EnableControllers(fs::path(dir).parent_path().string());
    dirs.push_back(dir);
    optional.push_back(0);
    c = {dir, dir, dir, dir, dir, dir, dir};
  } else {
    for (const auto& [controller, base] : layout.dirs) {
      const std::string dir = base + "/nexec/" + name;
      if (!fs::create_directories(dir, ec) && ec) {
        return absl::UnavailableError(absl::StrCat("cannot create the task's cgroup ", dir, ": ", ec.message()));
      }
      if (controller == "cpuset") {
        if (absl::Status s = InheritCpuset(dir); !s.ok()) {
          return absl::UnavailableError(absl::StrCat("the task's cpuset: ", s.message()));
        }
      }
      dirs.push_back(dir);
      optional.push_back(controller == "cpuset" || controller == "devices");
      if (controller == "freezer") c.freezer = dir;
      if (controller == "memory") c.memory = dir;
      if (controller == "cpuacct") c.cpu = dir;
      if (controller == "pids") c.pids = dir;
      if (controller == "cpuset") c.cpuset = dir;
      if (controller == "devices") c.devices = dir;
      if (controller == "blkio") c.io = dir;
    }
    if (c.freezer.empty()) return absl::UnavailableError("no v1 freezer hierarchy for the task's cgroup");
  }
  std::vector<int> fds;
  // The file the task's child writes itself into. v1: `tasks`, which moves one thread —
  // the child is a process of one thread until it execs, so that moves the process —
  // without the write lock on every thread group that cgroup.procs takes (each fork and
  // exit on the host holds it for reading: with thousands of tasks starting and ending a
  // second, the joins waited on each other). v2 has no such file for a domain cgroup.
  const char* join_file = layout.v2 ? "/cgroup.procs" : "/tasks";
  for (const std::string& dir : dirs) {
    const int fd = open((dir + join_file).c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      for (int f : fds) close(f);
      return absl::UnavailableError(absl::StrCat("cannot open ", dir, join_file, ": ", std::strerror(err)));
    }
    fds.push_back(KeepHigh(fd));
  }
  std::unique_ptr<TaskCgroup> made(new TaskCgroup(layout.v2, std::move(dirs), std::move(c), std::move(fds)));
  made->optional_ = std::move(optional);
  made->KeepOpen();
  made->skip_ = made->optional_;
  const Dirs& m = made->c_;
  made->has_memory_ = !m.memory.empty() && (layout.v2 ? fs::exists(m.memory + "/memory.max")
                                                       : fs::exists(m.memory + "/memory.limit_in_bytes"));
  made->has_memsw_ = !layout.v2 && made->has_memory_ && fs::exists(m.memory + "/memory.memsw.limit_in_bytes");
  made->has_pids_ = !m.pids.empty() && fs::exists(m.pids + "/pids.max");
  made->has_cpuset_ = !m.cpuset.empty() && fs::exists(m.cpuset + "/cpuset.cpus");
  made->has_oom_kill_count_ = !layout.v2 && made->has_memory_ &&
                              absl::StrContains(ReadText(m.memory + "/memory.oom_control"), "oom_kill ");
  // A new cgroup's cores are its parent's (v1: copied down by InheritCpuset; v2: inherited),
  // which is what an unbound task gets.
  made->applied_cpus_ = "";
  if (absl::Status s = made->Reset(limits); !s.ok()) return s;
  return made;
}

void TaskCgroup::RemoveBelow() {
  // A container's cgroup its runtime left (runc's, below the task's): empty once the task
  // ended, removed deepest first. v1 takes no devices.allow of "a" while it has children.
  for (const std::string& dir : dirs_) {
    std::vector<std::string> below;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec)) below.push_back(it->path().string());
    }
    for (auto it = below.rbegin(); it != below.rend(); ++it) rmdir(it->c_str());
  }
}

absl::Status TaskCgroup::Reset(const CgroupLimits& limits) {
  if (nested_) RemoveBelow();
  nested_ = false;
  for (size_t i = 0; i < optional_.size(); ++i) {
    const bool cpuset = dirs_[i] == c_.cpuset, devices = dirs_[i] == c_.devices;
    skip_[i] = optional_[i] && ((cpuset && limits.cpus.empty()) || (devices && limits.denied_devices.empty()));
  }
  memory_limit_bytes_ = limits.memory_bytes;
  if (!end_totals_) {
    end_totals_ = Totals{OomKills(), CpuSeconds(), {}};
    end_totals_->io = IoBytes();
  }
  // Counted from here: the totals as the previous task left them (read when it was reaped,
  // the cgroup empty since), or as read now.
  oom_kills_before_ = end_totals_->oom_kills;
  cpu_before_ = end_totals_->cpu_seconds;
  std::tie(read_before_, write_before_) = end_totals_->io;
  end_totals_.reset();
  if (!has_memory_ && limits.memory_bytes > 0) {
    return absl::UnavailableError("a memory limit was asked for, but this host has no memory controller for tasks");
  }
  if (has_memory_) {
    if (applied_memory_ != limits.memory_bytes) {
      applied_memory_.reset();  // unknown until written
      if (v2_) {
        JC_RETURN_IF_ERROR(WriteText(c_.memory + "/memory.max", limits.memory_bytes > 0 ? absl::StrCat(limits.memory_bytes) : "max"));
        // The limit is on memory, not memory plus swap.
        (void)WriteText(c_.memory + "/memory.swap.max", limits.memory_bytes > 0 ? "0" : "max");
      } else {
        const std::string value = limits.memory_bytes > 0 ? absl::StrCat(limits.memory_bytes) : "-1";
        // memsw must stay at least the memory limit, so it is raised before the limit and
        // lowered after it; which of the two this is depends on what the cgroup's previous
        // task had, so memsw is written on both sides (the first write fails harmlessly
        // when it would go below the limit in force). Unlimited after a limited task: memsw
        // first, or the kernel refuses the limit with EINVAL (the cgroup is reused).
        if (has_memsw_) (void)WriteText(c_.memory + "/memory.memsw.limit_in_bytes", value);
        JC_RETURN_IF_ERROR(WriteText(c_.memory + "/memory.limit_in_bytes", value));
        if (has_memsw_) (void)WriteText(c_.memory + "/memory.memsw.limit_in_bytes", value);
      }
      applied_memory_ = limits.memory_bytes;
    }
    if (v2_) {
      (void)Write(c_.memory + "/memory.peak", "0");  // kernels from 6.12: the peak of this task only
    } else {
      (void)Write(c_.memory + "/memory.max_usage_in_bytes", "0");  // the peak of this task only
      // failcnt tells an OOM kill only where oom_control does not count them (before 4.13).
      if (!has_oom_kill_count_) (void)Write(c_.memory + "/memory.failcnt", "0");
    }
  }
  if (has_pids_) {
    if (applied_pids_ != limits.pids) {
      applied_pids_.reset();
      JC_RETURN_IF_ERROR(WriteText(c_.pids + "/pids.max", limits.pids > 0 ? absl::StrCat(limits.pids) : "max"));
      applied_pids_ = limits.pids;
    }
  } else if (limits.pids > 0) {
    return absl::UnavailableError("a process limit was asked for, but this host has no pids controller for tasks");
  }
  if (has_cpuset_) {
    // Bound: its cores only, which it cannot widen (sched_setaffinity stays inside them).
    // Not bound: the parent's, which are the agent's.
    std::string cpus = JoinCpus(limits.cpus);
    if (applied_cpus_ != cpus) {
      applied_cpus_.reset();
      std::string value = cpus;
      if (value.empty() && !v2_) {
        value = std::string(absl::StripAsciiWhitespace(ReadText(fs::path(c_.cpuset).parent_path().string() + "/cpuset.cpus")));
      }
      JC_RETURN_IF_ERROR(WriteText(c_.cpuset + "/cpuset.cpus", value.empty() ? "\n" : value));
      applied_cpus_ = cpus;
    }
  } else if (!limits.cpus.empty()) {
    return absl::UnavailableError("the task is bound to cores, but this host has no cpuset controller for tasks");
  }
  return DenyDevices(limits.denied_devices);
}

absl::Status TaskCgroup::DenyDevices(const std::vector<CharDevice>& devices) {
  if (v2_) {
    if (devices.empty() && device_program_fd_ < 0) return absl::OkStatus();
    // The previous task's filter goes; a new one comes when there is something to deny.
    if (device_program_fd_ >= 0) {
      (void)DetachDeviceFilter(c_.devices, device_program_fd_);
      close(device_program_fd_);
      device_program_fd_ = -1;
    }
    if (devices.empty()) return absl::OkStatus();
    JC_ASSIGN_OR_RETURN(device_program_fd_, LoadDeviceFilter(devices));
    if (absl::Status s = AttachDeviceFilter(c_.devices, device_program_fd_); !s.ok()) {
      close(device_program_fd_);
      device_program_fd_ = -1;
      return s;
    }
    return absl::OkStatus();
  }
  if (c_.devices.empty()) {
    if (devices.empty()) return absl::OkStatus();
    return absl::UnavailableError("devices must be denied to the task, but this host has no devices controller");
  }
  // What the previous task was denied is allowed again, one by one (not with "a", which
  // v1 refuses while a container's cgroup below is still going away), then this task's.
  if (devices == denied_) return absl::OkStatus();  // the previous task's rules are this one's
  for (const CharDevice& d : denied_) {
    JC_RETURN_IF_ERROR(WriteText(c_.devices + "/devices.allow", absl::StrCat("c ", d.major, ":", d.minor, " rwm")));
  }
  denied_.clear();
  for (const CharDevice& d : devices) {
    JC_RETURN_IF_ERROR(WriteText(c_.devices + "/devices.deny", absl::StrCat("c ", d.major, ":", d.minor, " rwm")));
    denied_.push_back(d);
  }
  return absl::OkStatus();
}

double TaskCgroup::CpuSeconds() const {
  if (c_.cpu.empty()) return 0;
  if (v2_) return static_cast<double>(KeyedValue(Read(c_.cpu + "/cpu.stat"), "usage_usec")) / 1e6;
  return static_cast<double>(NumberIn(Read(c_.cpu + "/cpuacct.usage"))) / 1e9;
}

std::pair<int64_t, int64_t> TaskCgroup::IoBytes() const {
  if (c_.io.empty()) return {0, 0};
  const std::string text = Read(v2_ ? c_.io + "/io.stat" : c_.io + "/blkio.throttle.io_service_bytes");
  if (v2_) return {SumOverDevices(text, "rbytes"), SumOverDevices(text, "wbytes")};
  return {SumOverDevices(text, "Read"), SumOverDevices(text, "Write")};
}

int64_t TaskCgroup::OomKills() const {
  if (c_.memory.empty()) return 0;
  if (v2_) return KeyedValue(Read(c_.memory + "/memory.events"), "oom_kill");
  if (has_oom_kill_count_) return KeyedValue(Read(c_.memory + "/memory.oom_control"), "oom_kill");
  return NumberIn(Read(c_.memory + "/memory.failcnt")) > 0 ? 1 : 0;
}

TaskCgroup::TaskCgroup(bool v2, std::vector<std::string> dirs, Dirs by_controller, std::vector<int> procs_fds)
    : v2_(v2), dirs_(std::move(dirs)), c_(std::move(by_controller)), procs_fds_(std::move(procs_fds)) {}

void TaskCgroup::KeepOpen() {
  // What Usage, FinalUsage, Processes and the totals read for every task, some of them at
  // each heartbeat: opened once, so a read is one pread instead of a walk of the path, an
  // open and a close (perf, issue 32 item 6). Those a kernel lacks are read by path (none).
  // Not the lists of processes: a v1 cgroup.procs or tasks kept open answers the list it
  // made first for as long as it is read again within a second (the kernel's pidlist cache).
  std::vector<std::string> paths;
  if (v2_) {
    for (const char* f : {"/cpu.stat", "/io.stat", "/memory.stat", "/memory.peak", "/memory.swap.current",
                          "/memory.events", "/pids.current"}) {
      paths.push_back(c_.freezer + f);
    }
  } else {
    if (!c_.cpu.empty()) paths.push_back(c_.cpu + "/cpuacct.usage");
    if (!c_.io.empty()) paths.push_back(c_.io + "/blkio.throttle.io_service_bytes");
    if (!c_.memory.empty()) {
      for (const char* f : {"/memory.stat", "/memory.max_usage_in_bytes", "/memory.oom_control", "/memory.failcnt"}) {
        paths.push_back(c_.memory + f);
      }
    }
    // How many processes and threads it holds, its descendants' and zombies' included: a
    // count of 0 answers "is it empty" without reading the list (Processes).
    if (!c_.pids.empty()) paths.push_back(c_.pids + "/pids.current");
  }
  for (const std::string& path : paths) {
    // The peaks and failure counts every task's Reset sets back to 0 are kept writable too.
    const bool reset = absl::EndsWith(path, "/memory.max_usage_in_bytes") || absl::EndsWith(path, "/memory.failcnt") ||
                       absl::EndsWith(path, "/memory.peak");
    int fd = reset ? open(path.c_str(), O_RDWR | O_CLOEXEC) : -1;
    if (fd < 0) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);  // memory.peak is read-only before 6.12
    if (fd >= 0) kept_.emplace(path, KeepHigh(fd));
  }
}

absl::Status TaskCgroup::Write(const std::string& path, const std::string& text) {
  auto it = kept_.find(path);
  if (it != kept_.end() && pwrite(it->second, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size())) {
    return absl::OkStatus();
  }
  return WriteText(path, text);  // not kept, or kept read-only: by path, which says why it fails
}

bool TaskCgroup::SurelyEmpty() const {
  if (!has_pids_) return false;
  const auto it = kept_.find(c_.pids + "/pids.current");
  return it != kept_.end() && NumberIn(ReadFrom(it->second, /*one_record=*/true)) == 0;
}

std::string TaskCgroup::Read(const std::string& path) const {
  auto it = kept_.find(path);
  return it != kept_.end() ? ReadFrom(it->second, /*one_record=*/true) : ReadText(path);
}

TaskCgroup::~TaskCgroup() {
  for (int fd : procs_fds_) close(fd);
  for (const auto& [path, fd] : kept_) close(fd);
  if (device_program_fd_ >= 0) close(device_program_fd_);  // detached when the cgroup goes
}

int TaskCgroup::JoinFromChild() const {
  // "0": the writing process itself. Under v1 each write is a migration of its own: a
  // task bound to no cores and denied no devices stays in the agent's cpuset and devices
  // cgroups, which are what its own would be (a task in its image joins all: runc makes
  // the container's cgroups below the task's).
  for (size_t i = 0; i < procs_fds_.size(); ++i) {
    if (!nested_ && skip_[i]) continue;
    if (write(procs_fds_[i], "0", 1) != 1) return -1;
  }
  return 0;
}

absl::Status TaskCgroup::Add(pid_t pid) const {
  for (const std::string& dir : dirs_) {
    if (absl::Status s = WriteText(dir + "/cgroup.procs", absl::StrCat(pid)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status TaskCgroup::Freeze() {
  return v2_ ? WriteText(c_.freezer + "/cgroup.freeze", "1") : WriteText(c_.freezer + "/freezer.state", "FROZEN");
}

absl::Status TaskCgroup::Thaw() {
  return v2_ ? WriteText(c_.freezer + "/cgroup.freeze", "0") : WriteText(c_.freezer + "/freezer.state", "THAWED");
}

std::vector<pid_t> TaskCgroup::Processes() const {
  // Its own and those of cgroups below it (a task in its image: runc's, "image").
  std::vector<pid_t> out;
  if (SurelyEmpty()) return out;  // most tasks, once they ended: no list to read
  std::vector<std::string> dirs{c_.freezer};
  std::error_code ec;
  for (auto it = nested_ ? fs::recursive_directory_iterator(c_.freezer, ec) : fs::recursive_directory_iterator();
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec)) dirs.push_back(it->path().string());
  }
  for (const std::string& dir : dirs) {
    for (absl::string_view line : absl::StrSplit(Read(dir + "/cgroup.procs"), '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(line, &pid) && pid > 0) out.push_back(pid);
    }
  }
  return out;
}

absl::StatusOr<int> TaskCgroup::KillAll(int attempts) {
  const int found = static_cast<int>(Processes().size());
  if (found == 0) return 0;  // most tasks: their processes ended with them
  for (int i = 0; i < attempts; ++i) {
    if (v2_ && fs::exists(c_.freezer + "/cgroup.kill")) {
      (void)WriteText(c_.freezer + "/cgroup.kill", "1");  // the kernel's own: every process, at once
    } else {
      // Frozen, nothing in it can fork while its processes are listed and killed; a frozen
      // process dies of SIGKILL once thawed.
      (void)Freeze();
      for (pid_t pid : Processes()) kill(pid, SIGKILL);
      (void)Thaw();
    }
    if (Processes().empty()) return found;
    if (i + 1 < attempts) std::this_thread::sleep_for(std::chrono::milliseconds(i < 10 ? 2 : 20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("processes of cgroup ", c_.freezer, " outlived ", attempts, " rounds of SIGKILL"));
}

CgroupUsage TaskCgroup::FinalUsage() {
  Totals totals;
  CgroupUsage u = Usage(&totals);
  if (u.processes == 0) end_totals_ = totals;  // nothing left to add to them before the next Reset
  return u;
}

CgroupUsage TaskCgroup::Usage(Totals* totals) const {
  CgroupUsage u;
  const double cpu = CpuSeconds();
  u.cpu_seconds = std::max(0.0, cpu - cpu_before_);
  auto [read, written] = IoBytes();
  if (totals != nullptr) totals->cpu_seconds = cpu, totals->io = {read, written};
  u.read_bytes = std::max<int64_t>(0, read - read_before_);
  u.write_bytes = std::max<int64_t>(0, written - write_before_);
  u.processes = static_cast<int>(Processes().size());
  // Ended (most tasks, when their final usage is read): no threads, and no memory in use
  // but what they peaked at (an exited process's anonymous memory and swap are freed with
  // it), so memory.stat, the costliest file here (counters formatted after a statistics
  // flush), is not read.
  const bool ended = u.processes == 0;
  if (v2_) {
    u.memory_bytes = ended ? 0 : KeyedValue(Read(c_.memory + "/memory.stat"), "anon");
    u.memory_peak_bytes = NumberIn(Read(c_.memory + "/memory.peak"));
    u.swap_bytes = ended ? 0 : NumberIn(Read(c_.memory + "/memory.swap.current"));
    u.threads = ended ? 0 : static_cast<int>(NumberIn(Read(c_.pids + "/pids.current")));
    const int64_t oom = OomKills();
    if (totals != nullptr) totals->oom_kills = oom;
    u.oom_killed = oom > oom_kills_before_;
    return u;
  }
  u.threads = ended      ? 0
              : has_pids_ ? static_cast<int>(NumberIn(Read(c_.pids + "/pids.current")))
                          : LinesIn(Read(c_.freezer + "/tasks"));
  if (!c_.memory.empty()) {
    const std::string stat = ended ? std::string() : Read(c_.memory + "/memory.stat");
    u.memory_bytes = KeyedValue(stat, "rss");
    u.memory_peak_bytes = NumberIn(Read(c_.memory + "/memory.max_usage_in_bytes"));
    u.swap_bytes = KeyedValue(stat, "swap");
    // memory.oom_control's oom_kill (kernels from 4.13); failcnt past the limit otherwise.
    const int64_t oom = OomKills();
    if (totals != nullptr) totals->oom_kills = oom;
    u.oom_killed = oom > oom_kills_before_;
  }
  return u;
}

absl::Status TaskCgroup::Remove() {
  absl::Status outcome;
  RemoveBelow();
  for (const std::string& dir : dirs_) {
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
      outcome = absl::FailedPreconditionError(absl::StrCat("cannot remove cgroup ", dir, ": ", std::strerror(errno)));
    }
  }
  return outcome;
}

}  // namespace jc::nexec
