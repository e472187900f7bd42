#include "executor/agent/task_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace jc::nexec {
namespace {

namespace fs = std::filesystem;

// The v1 controllers a task's cgroup is made in (those this host mounts). The freezer is
// the one containment needs; the others limit and measure.
constexpr const char* kV1Controllers[] = {"freezer", "memory", "pids", "cpuacct", "devices"};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return absl::InternalError(absl::StrCat("cannot write \"", text, "\" to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

int64_t ReadNumber(const std::string& path) {
  int64_t v = 0;
  (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadText(path)), &v);
  return v;
}

// A "key value" line of a flat-keyed cgroup file (memory.stat, memory.events, cpu.stat).
int64_t KeyedNumber(const std::string& path, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(ReadText(path), '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t v = 0;
    if (f.size() == 2 && f[0] == key && absl::SimpleAtoi(f[1], &v)) return v;
  }
  return 0;
}

}  // namespace

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
  std::string freezer, memory, cpu, pids;
  std::error_code ec;
  if (layout.v2) {
    const std::string base = layout.dirs.at("");
    // Controllers reach a child only through its parent's subtree_control; the agent's own
    // directory may hold processes (v2 forbids controllers there then), so tasks live in
    // nexec/, which holds none.
    const std::string nexec = base + "/nexec";
    fs::create_directories(nexec, ec);
    std::string enable;
    for (const char* c : {"memory", "pids", "cpu"}) {
      if (absl::StrContains(ReadText(nexec + "/cgroup.controllers"), c)) absl::StrAppend(&enable, "+", c, " ");
    }
    if (!enable.empty()) (void)WriteText(nexec + "/cgroup.subtree_control", std::string(absl::StripTrailingAsciiWhitespace(enable)));
    const std::string dir = nexec + "/" + name;
    if (!fs::create_directories(dir, ec) && ec) {
      return absl::UnavailableError(absl::StrCat("cannot create the task's cgroup ", dir, ": ", ec.message()));
    }
    dirs.push_back(dir);
    freezer = memory = cpu = dir;
  } else {
    for (const auto& [controller, base] : layout.dirs) {
      const std::string dir = base + "/nexec/" + name;
      if (!fs::create_directories(dir, ec) && ec) {
        return absl::UnavailableError(absl::StrCat("cannot create the task's cgroup ", dir, ": ", ec.message()));
      }
      dirs.push_back(dir);
      if (controller == "freezer") freezer = dir;
      if (controller == "memory") memory = dir;
      if (controller == "cpuacct") cpu = dir;
      if (controller == "pids") pids = dir;
    }
    if (freezer.empty()) return absl::UnavailableError("no v1 freezer hierarchy for the task's cgroup");
  }
  std::vector<int> fds;
  for (const std::string& dir : dirs) {
    const int fd = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      for (int f : fds) close(f);
      return absl::UnavailableError(absl::StrCat("cannot open ", dir, "/cgroup.procs: ", std::strerror(err)));
    }
    fds.push_back(fd);
  }
  if (layout.v2) pids = freezer;
  std::unique_ptr<TaskCgroup> made(new TaskCgroup(layout.v2, std::move(dirs), freezer, memory, cpu, std::move(fds)));
  made->pids_dir_ = pids;
  if (absl::Status s = made->Reset(limits); !s.ok()) return s;
  return made;
}

absl::Status TaskCgroup::Reset(const CgroupLimits& limits) {
  memory_limit_bytes_ = limits.memory_bytes;
  oom_kills_before_ = OomKills();
  if (!memory_dir_.empty()) {
    if (v2_) {
      JC_RETURN_IF_ERROR(WriteText(memory_dir_ + "/memory.max", limits.memory_bytes > 0 ? absl::StrCat(limits.memory_bytes) : "max"));
      // The limit is on memory, not memory plus swap.
      (void)WriteText(memory_dir_ + "/memory.swap.max", limits.memory_bytes > 0 ? "0" : "max");
    } else {
      const std::string value = limits.memory_bytes > 0 ? absl::StrCat(limits.memory_bytes) : "-1";
      const bool memsw = fs::exists(memory_dir_ + "/memory.memsw.limit_in_bytes");
      // memsw must stay at least the memory limit: raised after it, lowered before it.
      if (memsw && limits.memory_bytes > 0) (void)WriteText(memory_dir_ + "/memory.memsw.limit_in_bytes", value);
      JC_RETURN_IF_ERROR(WriteText(memory_dir_ + "/memory.limit_in_bytes", value));
      if (memsw && limits.memory_bytes > 0) (void)WriteText(memory_dir_ + "/memory.memsw.limit_in_bytes", value);
      if (memsw && limits.memory_bytes <= 0) (void)WriteText(memory_dir_ + "/memory.memsw.limit_in_bytes", "-1");
      (void)WriteText(memory_dir_ + "/memory.max_usage_in_bytes", "0");  // the peak of this task only
      (void)WriteText(memory_dir_ + "/memory.failcnt", "0");
    }
  }
  if (!pids_dir_.empty()) (void)WriteText(pids_dir_ + "/pids.max", limits.pids > 0 ? absl::StrCat(limits.pids) : "max");
  return absl::OkStatus();
}

int64_t TaskCgroup::OomKills() const {
  if (memory_dir_.empty()) return 0;
  if (v2_) return KeyedNumber(memory_dir_ + "/memory.events", "oom_kill");
  const std::string control = ReadText(memory_dir_ + "/memory.oom_control");
  if (absl::StrContains(control, "oom_kill ")) return KeyedNumber(memory_dir_ + "/memory.oom_control", "oom_kill");
  return ReadNumber(memory_dir_ + "/memory.failcnt") > 0 ? 1 : 0;
}

TaskCgroup::TaskCgroup(bool v2, std::vector<std::string> dirs, std::string freezer, std::string memory, std::string cpu,
                       std::vector<int> procs_fds)
    : v2_(v2),
      dirs_(std::move(dirs)),
      freezer_dir_(std::move(freezer)),
      memory_dir_(std::move(memory)),
      cpu_dir_(std::move(cpu)),
      procs_fds_(std::move(procs_fds)) {}

TaskCgroup::~TaskCgroup() {
  for (int fd : procs_fds_) close(fd);
}

int TaskCgroup::JoinFromChild() const {
  // "0": the writing process itself.
  for (int fd : procs_fds_) {
    if (write(fd, "0", 1) != 1) return -1;
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
  return v2_ ? WriteText(freezer_dir_ + "/cgroup.freeze", "1") : WriteText(freezer_dir_ + "/freezer.state", "FROZEN");
}

absl::Status TaskCgroup::Thaw() {
  return v2_ ? WriteText(freezer_dir_ + "/cgroup.freeze", "0") : WriteText(freezer_dir_ + "/freezer.state", "THAWED");
}

std::vector<pid_t> TaskCgroup::Processes() const {
  std::vector<pid_t> out;
  for (absl::string_view line : absl::StrSplit(ReadText(freezer_dir_ + "/cgroup.procs"), '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) out.push_back(pid);
  }
  return out;
}

absl::StatusOr<int> TaskCgroup::KillAll(int attempts) {
  const int found = static_cast<int>(Processes().size());
  for (int i = 0; i < attempts; ++i) {
    if (v2_ && fs::exists(freezer_dir_ + "/cgroup.kill")) {
      (void)WriteText(freezer_dir_ + "/cgroup.kill", "1");  // the kernel's own: every process, at once
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
      absl::StrCat("processes of cgroup ", freezer_dir_, " outlived ", attempts, " rounds of SIGKILL"));
}

CgroupUsage TaskCgroup::Usage() const {
  CgroupUsage u;
  if (v2_) {
    u.cpu_seconds = static_cast<double>(KeyedNumber(cpu_dir_ + "/cpu.stat", "usage_usec")) / 1e6;
    u.memory_bytes = ReadNumber(memory_dir_ + "/memory.current");
    u.memory_peak_bytes = ReadNumber(memory_dir_ + "/memory.peak");
    u.oom_killed = OomKills() > oom_kills_before_;
    return u;
  }
  if (!cpu_dir_.empty()) u.cpu_seconds = static_cast<double>(ReadNumber(cpu_dir_ + "/cpuacct.usage")) / 1e9;
  if (!memory_dir_.empty()) {
    u.memory_bytes = ReadNumber(memory_dir_ + "/memory.usage_in_bytes");
    u.memory_peak_bytes = ReadNumber(memory_dir_ + "/memory.max_usage_in_bytes");
    // memory.oom_control's oom_kill (kernels from 4.13); failcnt past the limit otherwise.
    u.oom_killed = OomKills() > oom_kills_before_;
  }
  return u;
}

absl::Status TaskCgroup::Remove() {
  absl::Status outcome;
  for (const std::string& dir : dirs_) {
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
      outcome = absl::FailedPreconditionError(absl::StrCat("cannot remove cgroup ", dir, ": ", std::strerror(errno)));
    }
  }
  return outcome;
}

}  // namespace jc::nexec
