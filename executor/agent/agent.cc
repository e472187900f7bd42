#include "executor/agent/agent.h"
#include "executor/master/agent_dialer.h"
#include "executor/policy/cluster.h"

#include <cmath>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/exec/exec_stream.h"
#include "common/grpc_reflection.h"
#include "common/grpc_server_threads.h"
#include "common/grpc_status.h"
#include "common/quantity.h"
#include "common/status_macros.h"
#include "executor/agent/agent_service.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {
namespace {

std::string TaskKey(int64_t job, int32_t task, int32_t attempt) {
  return absl::StrCat(job, ".", task, ".", attempt);
}

// An elastic job's event file: created empty (truncated for a new attempt) with its
// directory, as the job's user (the path is the user's to choose). The descriptor stays
// with the task, so the agent's later appends go to that file and nowhere a link leads.
absl::StatusOr<std::shared_ptr<OwnedFd>> CreateEventFile(const std::string& path, const std::string& user,
                                                          const std::string& output_root) {
  auto account = LookupAccount(user);
  if (!account.ok()) return account.status();
  // An agent that runs as an account creates nothing for another (OpenAs's CheckMayActFor,
  // before any directory is made; attacker helper-95: another account's launch truncated
  // this account's files).
  // Without waiting (a FIFO with no reader is refused at once, not waited on: attacker
  // helper-59 stalled an agent's launches with one), and a regular file only.
  auto fd = OpenRegularTaskFile(*account, path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600, output_root);
  if (!fd.ok()) return absl::InvalidArgumentError(absl::StrCat("event file: ", fd.status().message()));
  return std::make_shared<OwnedFd>(std::move(*fd));
}

// The start time of a process in clock ticks since boot (/proc/<pid>/stat field 22); 0 when
// it is gone.
uint64_t ProcessStartTime(pid_t pid) {
  std::vector<std::string> f = ProcStatFields(pid);
  uint64_t start = 0;
  if (f.size() > 19) (void)absl::SimpleAtoi(f[19], &start);
  return start;
}

// MemAvailable and SwapFree from /proc/meminfo, in MB.
std::pair<double, double> ReadFreeMemory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0, available = 0, swap = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") available = kb / 1024;
    if (key == "SwapFree:") swap = kb / 1024;
  }
  return {available, swap};
}

double ReadLoad() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  in >> load;
  return load;
}

}  // namespace

pb::AgentInfo MeasureHost() {
  pb::AgentInfo info;
  info.set_cpus(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  struct sysinfo si {};
  if (sysinfo(&si) == 0) {
    info.set_mem_mb(static_cast<double>(si.totalram) * si.mem_unit / (1024 * 1024));
    info.set_swap_mb(static_cast<double>(si.totalswap) * si.mem_unit / (1024 * 1024));
  }
  info.set_load_1m(ReadLoad());
  return info;
}

absl::Status ApplyDeclaredResources(const std::string& declared, pb::AgentInfo* info) {
  for (absl::string_view item : absl::StrSplit(declared, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::string key(absl::StripAsciiWhitespace(kv.first));
    std::string value(absl::StripAsciiWhitespace(kv.second));
    int n = 0;
    if (key == "cpus" || key == "slots") {
      if (!absl::SimpleAtoi(value, &n) || n < 1) {
        return absl::InvalidArgumentError(absl::StrCat("--resources ", key, "=", value,
                                                       ": expected a whole number of at least 1"));
      }
      info->set_cpus(n);
    } else if (key == "gpus") {
      if (!absl::SimpleAtoi(value, &n) || n < 0) {
        return absl::InvalidArgumentError(absl::StrCat("--resources gpus=", value,
                                                       ": expected a whole number"));
      }
      info->clear_gpus();
      for (int i = 0; i < n; ++i) info->add_gpus(i);
    } else if (key == "mem" || key == "swap") {
      // Sizes as quantities in bytes ("512G", "64Gi"); a plain number is MB.
      double mb = 0;
      if (absl::SimpleAtod(value, &mb)) {
      } else {
        auto q = Quantity::Parse(value);
        if (!q.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("--resources ", key, "=", value, ": ",
                                                         q.status().message()));
        }
        mb = static_cast<double>(q->CeilMebibytes());
      }
      if (mb < 0) return absl::InvalidArgumentError(absl::StrCat("--resources ", key, " < 0"));
      // "inf", 1e300: no host has it, and the master and the native adapter take it as a
      // number of MB (a cast of it to an integer is undefined). A pebibyte is the most.
      if (!std::isfinite(mb)) {
        return absl::InvalidArgumentError(absl::StrCat("--resources ", key, "=", value, ": not a finite size"));
      }
      if (mb > kMaxHostMemMb) {
        return absl::InvalidArgumentError(absl::StrCat("--resources ", key, "=", value, ": more than ",
                                                       static_cast<int64_t>(kMaxHostMemMb), " MB (1 PiB)"));
      }
      key == "mem" ? info->set_mem_mb(mb) : info->set_swap_mb(mb);
    } else if (!key.empty()) {
      (*info->mutable_resources())[key] = value;
    }
  }
  return absl::OkStatus();
}

Agent::Agent(AgentOptions options) : options_(std::move(options)) {}

Agent::~Agent() { Stop(); }

namespace {

// The task cgroups of agents of this machine that are gone (nexec/<host>.<pid> with no
// such process): what is still in them is ended — processes a predecessor's tasks moved
// out of their process groups, which KillPredecessorTasks cannot see — and the
// directories removed. Returns how many processes were ended.
// Kills every process in the cgroup `dir` until none is left (a few rounds: one may fork
// while it is listed); returns how many were found in the first round.
int EmptyCgroup(const std::filesystem::path& dir) {
  int ended = 0;
  for (int round = 0; round < 20; ++round) {
    std::ifstream procs(dir / "cgroup.procs");
    int p = 0;
    bool any = false;
    while (procs >> p) {
      any = true;
      if (kill(p, SIGKILL) == 0 && round == 0) ++ended;
    }
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ended;
}

int EndTasksOfDeadAgents(const CgroupLayout& layout) {
  int ended = 0;
  for (const auto& [controller, base] : layout.dirs) {
    std::error_code ec;
    for (const auto& agent_dir : std::filesystem::directory_iterator(base + "/nexec", ec)) {
      if (!agent_dir.is_directory()) continue;
      const std::string name = agent_dir.path().filename().string();
      int pid = 0;
      const auto dot = name.rfind('.');
      if (dot == std::string::npos || !absl::SimpleAtoi(name.substr(dot + 1), &pid) || pid <= 0) continue;
      if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // that agent lives
      // Its whole tree (<agent>/nexec/<task>, and a container's cgroup below a task),
      // deepest first: rmdir takes only a cgroup without processes and without children.
      std::vector<std::filesystem::path> dirs{agent_dir.path()};
      std::error_code ec2;
      for (auto it = std::filesystem::recursive_directory_iterator(agent_dir.path(), ec2);
           !ec2 && it != std::filesystem::recursive_directory_iterator(); it.increment(ec2)) {
        if (it->is_directory(ec2)) dirs.push_back(it->path());
      }
      for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
        ended += EmptyCgroup(*it);
        rmdir(it->c_str());
      }
    }
  }
  return ended;
}

// v2 enables controllers for a directory's children only while the directory holds no
// process ("no internal processes"): the agent leaves its own cgroup for a leaf beside the
// tasks' (nexec-agent.<pid>), so their memory, pids, cpuset and io limits can reach them.
// Leaves of agents that ended are removed (rmdir takes only empty ones). The root cgroup
// is exempt from the rule: nothing to do there.
void MoveIntoLeaf(const std::string& dir) {
  if (!std::filesystem::exists(dir + "/cgroup.type")) return;  // the root
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("nexec-agent.", 0) == 0) rmdir(entry.path().c_str());
  }
  const std::string leaf = absl::StrCat(dir, "/nexec-agent.", getpid());
  std::filesystem::create_directories(leaf, ec);
  std::ofstream procs(leaf + "/cgroup.procs");
  procs << getpid() << "\n";
  procs.flush();
  if (ec || !procs) {
    spdlog::warn("nexec agent: could not move into {} ({}): tasks' cgroups may get no memory, pids or cpuset "
                 "controller, and their limits then fail at launch",
                 leaf, ec ? ec.message() : "write to cgroup.procs failed");
  }
}

// Whether this process's account may run rootless containers: make a user namespace with
// a mount namespace in it (runc's; a security module may allow the first and deny the
// capabilities the second needs), map root in it to the account, and make a namespace
// nested in that one (nexec-userns-exec's). Asked of the kernel in a child that exits at
// once, which says on a pipe which step failed and why.
absl::Status CanRunRootless() {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  const std::string uid_map = absl::StrCat("0 ", uid, " 1\n"), gid_map = absl::StrCat("0 ", gid, " 1\n");
  const pid_t pid = fork();
  if (pid < 0) {
    close(report[0]);
    close(report[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    auto write_file = [](const char* path, const std::string& text) {
      const int fd = open(path, O_WRONLY | O_CLOEXEC);
      const bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      if (fd >= 0) close(fd);
      return ok;
    };
    int step = 0;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      step = 1;
    } else if (!write_file("/proc/self/setgroups", "deny") || !write_file("/proc/self/uid_map", uid_map) ||
               !write_file("/proc/self/gid_map", gid_map)) {
      step = 2;
    } else if (unshare(CLONE_NEWUSER) != 0) {
      step = 3;
    }
    const int out[2] = {step, errno};
    if (write(report[1], out, sizeof out) != static_cast<ssize_t>(sizeof out)) _exit(1);
    _exit(0);
  }
  close(report[1]);
  int got[2] = {-1, 0};
  const ssize_t n = read(report[0], got, sizeof got);
  close(report[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof got) && got[0] == 0) return absl::OkStatus();
  if (n != static_cast<ssize_t>(sizeof got)) return absl::InternalError("the user namespace probe said nothing");
  const char* what = got[0] == 1   ? "make a user namespace with a mount namespace in it"
                     : got[0] == 2 ? "map root in its user namespace to itself"
                                   : "make a user namespace in its own";
  const int err = got[1];
  std::string why = err == ENOSPC ? "it has as many user namespaces as it may (the user.max_user_namespaces sysctl)"
                    : (err == EINVAL || err == ENOSYS) ? "this kernel has no user namespaces"
                    : (err == EPERM || err == EACCES)
                        ? "the kernel or a security module (AppArmor's or SELinux's rules for unprivileged user "
                          "namespaces, the kernel.unprivileged_userns_clone sysctl) refuses it"
                        : std::strerror(err);
  return absl::FailedPreconditionError(absl::StrCat("its account may not ", what, ", which rootless runc needs: ", why));
}

}  // namespace

void Agent::SetUpImages() {
  std::string runner = options_.image_runner;
  if (runner.empty()) {
    std::error_code ec;
    runner = (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "nexec-image-run").string();
  }
  // Not root (run as an account): its containers are rootless, their commands given the
  // account's ids by nexec-userns-exec, the one beside this agent.
  const bool rootless = geteuid() != 0;
  std::string userns_helper;
  if (rootless) {
    std::error_code ec;
    userns_helper = (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "nexec-userns-exec").string();
  }
  // setpriv and unshare: the runner's as root (its own mount namespace, the unpack's uid).
  std::vector<std::string> tools = {"/usr/bin/runc", "/usr/bin/skopeo", "/usr/bin/umoci", runner};
  if (rootless) {
    tools.push_back(userns_helper);
  } else {
    tools.insert(tools.end(), {"/usr/bin/setpriv", "/usr/bin/unshare"});
  }
  std::vector<std::string> missing;
  for (const std::string& tool : tools) {
    if (access(tool.c_str(), X_OK) != 0) missing.push_back(tool);
  }
  if (!missing.empty()) {
    spdlog::warn("nexec agent: jobs with --image cannot run here (missing {}); they end with that reason",
                 absl::StrJoin(missing, ", "));
    runner_.RunNoImages(absl::StrCat("it found no ", absl::StrJoin(missing, ", ")));
    return;
  }
  if (rootless) {
    if (absl::Status userns = CanRunRootless(); !userns.ok()) {
      spdlog::warn("nexec agent: jobs with --image cannot run here ({}); they end with that reason",
                   std::string(userns.message()));
      runner_.RunNoImages(std::string(userns.message()));
      return;
    }
  }
  ImageRunning images;
  images.runner = runner;
  images.userns_helper = userns_helper;
  images.store = options_.image_store.empty() ? options_.state_dir + "/images" : options_.image_store;
  images.auth_file = options_.registry_auth_file;
  images.cert_dir = options_.registry_cert_dir;
  images.store_limit_mb = options_.image_store_limit_mb;
  images.pull_timeout_s = std::max<int64_t>(1, absl::ToInt64Seconds(options_.image_pull_timeout));
  images.unpack_uid = options_.image_unpack_uid;
  images.munge_socket = options_.auth.socket();
  {
    // nexec-run inside images: the one beside this agent, on the host's libraries.
    std::error_code ec;
    const auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "nexec-run";
    const auto loader = std::filesystem::canonical("/lib64/ld-linux-x86-64.so.2", ec);
    if (!ec && access(beside.c_str(), X_OK) == 0) {
      images.nexec_run = beside.string();
      images.host_lib_dir = loader.parent_path().string();
      images.nexec_run_wrapper = images.store + "/.nexec-run";
      std::filesystem::create_directories(images.store, ec);
      std::ofstream wrapper(images.nexec_run_wrapper);
      wrapper << "#!/bin/sh\n# nexec-run in a task's image: the host's, on the host's libraries (task_runner.h)\n"
              << "exec /tmp/.jc/lib/" << loader.filename().string()
              << " --library-path /tmp/.jc/lib /tmp/.jc/nexec-run.bin \"$@\"\n";
      wrapper.close();
      chmod(images.nexec_run_wrapper.c_str(), 0755);
      if (!wrapper) images.nexec_run.clear();
    }
  }
  auto gpus = GpuContainerSetup::Load(options_.cdi_spec_dirs, options_.gpu_driver_dir, options_.gpu_device);
  if (!gpus.ok()) {
    spdlog::warn("nexec agent: jobs with --image cannot run here ({})", std::string(gpus.status().message()));
    return;
  }
  images.gpus = std::move(*gpus);
  std::error_code ec;
  std::filesystem::create_directories(images.store, ec);
  chmod(images.store.c_str(), 0700);  // the images' files are the agent's to give
  if (geteuid() == 0) {
    // Unpacked without privilege, into a store no node or set-id bit counts in (issue 44).
    if (absl::Status unpack = CheckUnprivilegedUnpack(images.store, images.unpack_uid); !unpack.ok()) {
      spdlog::warn("nexec agent: jobs with --image cannot run here ({}); they end with that reason",
                   std::string(unpack.message()));
      runner_.RunNoImages(std::string(unpack.message()));
      return;
    }
  }
  spdlog::info("nexec agent: tasks with an image run in it (runc{}), images kept in {}; GPUs in images: {}",
               rootless ? ", rootless: this agent is not root" : "", images.store, images.gpus.Describe());
  image_store_ = images.store;
  runner_.RunImagesWith(std::move(images));
}

absl::Status Agent::SetUpContainment() {
  if (options_.cgroups == "off") return absl::OkStatus();
  if (options_.cgroups != "auto" && options_.cgroups != "on") {
    return absl::InvalidArgumentError(absl::StrCat("--cgroups: auto, on or off, not \"", options_.cgroups, "\""));
  }
  // Tasks go under the agent's own cgroup, in a directory of this agent (several agents
  // may share a machine, as in tests).
  absl::StatusOr<CgroupLayout> layout = CgroupLayout::Discover();
  if (layout.ok()) {
    if (int ended = EndTasksOfDeadAgents(*layout); ended > 0) {
      spdlog::warn("nexec agent: ended {} process(es) left in the cgroups of agents that died", ended);
    }
    const std::string mine = absl::StrCat("nexec/", options_.host, ".", getpid());
    if (layout->v2) MoveIntoLeaf(layout->dirs.at(""));
    CgroupLayout agent_layout = *layout;
    for (auto& [controller, dir] : agent_layout.dirs) {
      std::error_code ec;
      std::filesystem::create_directories(dir + "/" + mine, ec);
      if (ec) {
        layout = absl::UnavailableError(absl::StrCat("cannot create ", dir, "/", mine, ": ", ec.message()));
        break;
      }
      dir += "/" + mine;
    }
    if (layout.ok()) {
      for (const auto& [controller, dir] : agent_layout.dirs) {
        spdlog::info("nexec agent: tasks are contained in cgroups under {}{}", dir,
                     controller.empty() ? " (v2)" : absl::StrCat(" (v1 ", controller, ")"));
      }
      if (agent_layout.v2) {
        const std::vector<std::string> missing = PrepareTaskControllersV2(agent_layout.dirs.at(""));
        if (!missing.empty()) {
          spdlog::warn("nexec agent: tasks get no {} controller: a cgroup above them holds processes of its own, "
                       "and cgroup v2 then passes no controllers down (run the agent in a cgroup of its own; "
                       "systemd: Delegate=yes). Tasks are still contained (kill, suspend, devices); limits that "
                       "need these controllers end their jobs with that reason",
                       absl::StrJoin(missing, ", "));
        }
      }
      runner_.ContainIn(std::move(agent_layout));
      return absl::OkStatus();
    }
  }
  if (options_.cgroups == "on") {
    return absl::FailedPreconditionError(absl::StrCat("--cgroups=on: ", layout.status().message()));
  }
  spdlog::warn("nexec agent: tasks are NOT contained in cgroups ({}): a task that leaves its process group (setsid) "
               "escapes kill and suspend, and rusage[mem] is not a limit. Run the agent as root on a host with cgroups "
               "(--cgroups=on makes this an error)",
               std::string(layout.status().message()));
  return absl::OkStatus();
}

absl::StatusOr<int> Agent::Start() {
  // Several masters may be given: an address that answers as something else than a nexec
  // master is a mistake said now; one that does not answer may be a standby that is down.
  JC_ASSIGN_OR_RETURN(masters_, MasterList::Parse(options_.master_address));
  masters_->Prove(options_.auth, {options_.master_uid});
  JC_RETURN_IF_ERROR(masters_->Check(absl::Seconds(2)));
  pb::AgentInfo info = MeasureHost();
  // GPUs, their model and memory from nvidia-smi; what --resources declares wins.
  if (absl::Status gpus = gpu_watch_.Probe(&info); !gpus.ok()) {
    spdlog::warn("nexec agent: {} did not answer ({}); GPUs are not found yet, asked again with each heartbeat",
                 options_.nvidia_smi, std::string(gpus.message()));
  }
  JC_RETURN_IF_ERROR(ApplyDeclaredResources(options_.declared, &info));
  for (const auto& [k, v] : options_.resources) (*info.mutable_resources())[k] = v;
  if (options_.host.empty()) {
    char name[256] = {0};
    gethostname(name, sizeof(name) - 1);
    options_.host = name;
  }
  info.set_host(options_.host);
  {
    absl::MutexLock lock(&mu_);
    base_info_ = info;
  }
  if (options_.state_dir.empty()) {
    options_.state_dir = (std::filesystem::temp_directory_path() / ("nexec-agent-" + options_.host)).string();
  }
  std::error_code ec;
  options_.state_dir = std::filesystem::absolute(options_.state_dir).lexically_normal().string();
  const bool made = std::filesystem::create_directories(options_.state_dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot create ", options_.state_dir, ": ", ec.message()));
  if (made) chmod(options_.state_dir.c_str(), 0700);
  {
    // The journal, the store served and its term are the agent's word on what ran here: a
    // directory another account made or may write (the default lies in /tmp) would let it
    // forge them, or point them at root's files.
    struct stat st{};
    if (lstat(options_.state_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("the state directory ", options_.state_dir,
                                                     " is not a directory (a link?); give --state_dir"));
    }
    if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the state directory ", options_.state_dir, " belongs to uid ", st.st_uid, " (mode ",
          absl::StrFormat("%o", st.st_mode & 07777), "): an agent's state must be its own account's and writable by "
          "no other; remove it or give --state_dir"));
    }
  }
  {
    // The master store this agent served before it stopped (its journal's tasks are that
    // store's): a master of another store is refused while they run, and served after.
    // A line "IDENTITY TERM" (an agent from before terms wrote the identity alone).
    std::ifstream in(std::filesystem::path(options_.state_dir) / "master.identity");
    std::string line;
    std::getline(in, line);
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    absl::MutexLock lock(&mu_);
    master_identity_ = fields.empty() ? "" : fields[0];
    if (fields.size() > 1 && !absl::SimpleAtoi(fields[1], &master_term_)) master_term_ = 0;
  }
  auto journal = TaskJournal::Open((std::filesystem::path(options_.state_dir) / "tasks.journal").string(),
                                   (std::filesystem::path(options_.state_dir) / "tasks").string());
  if (!journal.ok()) return journal.status();
  journal_ = std::move(*journal);
  auto killed_or = KillPredecessorTasks();
  if (!killed_or.ok()) return killed_or.status();
  if (int killed = *killed_or; killed > 0) {
    spdlog::warn("nexec agent {}: killed {} task(s) a previous agent on this host left running; the master reruns "
                 "or fails their jobs as their queues say",
                 options_.host, killed);
  }
  JC_RETURN_IF_ERROR(SetUpContainment());
  SetUpImages();
  runner_.ExecDirectly(options_.direct_exec);
  if (!options_.sensor_dir.empty()) {
    auto found = FindSensors(options_.sensor_dir, options_.host);
    for (const auto& s : found) spdlog::info("resource sensor {}", s);
    sensors_ = std::make_unique<SensorRunner>(found, options_.sensor_restart_delay);
  }
  service_ = MakeAgentService(this, options_.auth, options_.master_uid);
  EnableGrpcReflection();
  grpc::ServerBuilder builder;
  int port = 0;
  // One process per address, as the master: with SO_REUSEPORT a second agent given this one's
  // address (or a copy of its socket a stuck child of an earlier agent still held) would
  // share its connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options_.listen_address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  ConfigureServerThreads(builder, "nexec-agent", 256);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("agent cannot listen on ", options_.listen_address));
  }
  std::string host = options_.listen_address.substr(0, options_.listen_address.rfind(':'));
  address_ = absl::StrCat(host, ":", port);
  {
    absl::MutexLock lock(&mu_);
    base_info_.set_address(address_);
  }
  if (options_.master_stream) {
    std::vector<uid_t> master_uids = {options_.master_uid};
    stream_ = std::make_unique<MasterStream>(
        options_.auth, options_.host, master_uids, [this](const pb::LaunchBatchRequest& req) {
          // As AgentService::LaunchBatch answers a call: the frame came sealed in a session
          // the master's account opened (its welcome), as a call must carry its credential.
          std::vector<const pb::LaunchRequest*> launches;
          for (const auto& launch : req.launches()) launches.push_back(&launch);
          pb::LaunchBatchResponse resp;
          for (absl::StatusOr<int>& pid : LaunchBatch(launches)) {
            pb::LaunchResult* r = resp.add_results();
            if (pid.ok()) {
              r->set_pid(*pid);
            } else {
              r->set_code(static_cast<int>(pid.status().code()));
              r->set_message(std::string(pid.status().message()));
            }
          }
          return resp;
        });
  }
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  phase_starter_ = std::thread([this] { PhaseStarterLoop(); });
  spdlog::info("nexec agent {} listening on {} ({} cpus, {} MB, {} gpus)", options_.host,
               address_, info.cpus(), info.mem_mb(), info.gpus_size());
  return port;
}

void Agent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.SignalAll();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (phase_starter_.joinable()) phase_starter_.join();
  stream_.reset();  // the loop's, ended with it
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  sensors_.reset();
}

pb::AgentInfo Agent::CurrentInfo() {
  pb::AgentInfo info = base_info_;
  info.set_load_1m(ReadLoad());
  auto [mem_free, swap_free] = ReadFreeMemory();
  info.set_mem_free_mb(mem_free);
  info.set_swap_free_mb(swap_free);
  if (sensors_) {
    for (auto& r : sensors_->Current()) *info.add_sensors() = std::move(r);
  }
  if (!image_store_.empty()) {
    for (auto& d : ImagesInStore(image_store_)) info.add_image_digests(std::move(d));
  }
  return info;
}

namespace {

// The processes whose environment names one of `keys` (NEXEC_TASK_KEY, which every task
// and its children inherit), by key. For tasks a previous agent started but died before
// recording their process group: their user code may already run.
// Processes of the given task keys started by the agent of `state_dir` (both from their
// environment): task keys repeat across clusters (job 1, task 0, attempt 0), so another
// agent's task of the same key on this machine is never taken for one of ours.
// The task key of process `pid` if the agent of `state_dir` started it, else "".
std::string TaskKeyOf(pid_t pid, const std::string& state_dir) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string var, key, state;
  while (std::getline(in, var, '\0')) {
    if (var.rfind("NEXEC_TASK_KEY=", 0) == 0) key = var.substr(15);
    if (var.rfind("NEXEC_AGENT_STATE=", 0) == 0) state = var.substr(18);
  }
  return state == state_dir ? key : "";
}

std::map<std::string, std::vector<pid_t>> ProcessesOfTasks(const std::set<std::string>& keys,
                                                           const std::string& state_dir) {
  std::map<std::string, std::vector<pid_t>> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid <= 1 || pid == getpid()) continue;
    const std::string key = TaskKeyOf(pid, state_dir);
    if (!key.empty() && keys.count(key)) out[key].push_back(pid);
  }
  return out;
}

// Kills every process a predecessor's still-running tasks (`keys`) left, wherever it went:
// the processes of a container, which runc starts in a session of their own, out of the
// task's group (reviewer helper-99: a restarted agent left them running). Each through a
// pidfd opened before its environment is read again, so a pid the kernel gave to another
// process meanwhile is never signalled. Returns how many.
int KillLeftProcesses(const std::set<std::string>& keys, const std::string& state_dir) {
  int killed = 0;
  for (int round = 0; round < 10; ++round) {  // again: one may have forked meanwhile
    int found = 0;
    for (const auto& [key, pids] : ProcessesOfTasks(keys, state_dir)) {
      for (pid_t pid : pids) {
        const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
        if (pidfd < 0) continue;
        if (TaskKeyOf(pid, state_dir) == key && syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) == 0) {
          ++found;
          spdlog::info("nexec agent: killed process {} of task {}, left by a previous agent out of its group", pid, key);
        }
        close(pidfd);
      }
    }
    killed += found;
    if (found == 0) break;
  }
  return killed;
}

}  // namespace

absl::StatusOr<int> Agent::KillPredecessorTasks() {
  int killed = 0;
  std::error_code ec;
  // A task file still saying "0 0": its process was perhaps started, its group not yet
  // recorded when the agent died. Found by its environment instead.
  std::set<std::string> unrecorded;
  for (const auto& [key, task] : journal_->Inherited()) {
    if (task.pgid == 0) unrecorded.insert(key);
  }
  if (!unrecorded.empty()) {
    for (const auto& [key, pids] : ProcessesOfTasks(unrecorded, options_.state_dir)) {
      for (pid_t pid : pids) {
        const pid_t group = getpgid(pid);
        // Its own group (a task leads one); never the agent's.
        const bool own_group = group > 1 && group != getpgrp();
        if ((own_group ? killpg(group, SIGKILL) : kill(pid, SIGKILL)) == 0) {
          ++killed;
          spdlog::info("nexec agent: killed process {} of task {}, left by a previous agent before it recorded it",
                       pid, key);
        }
      }
    }
  }
  {
    std::set<std::string> running;
    for (const auto& [key, recorded] : journal_->Inherited()) {
      if (!recorded.exit_code) running.insert(key);
    }
    if (!running.empty()) killed += KillLeftProcesses(running, options_.state_dir);
  }
  for (const auto& [key, recorded] : journal_->Inherited()) {
    const pid_t pgid = recorded.pgid;
    const uint64_t start = recorded.start_time;
    if (pgid > 1 && !recorded.exit_code) {
      // Ours when the group's leader is the process we started, or when the leader is
      // gone but its group lives on (a pid is not reused while its group exists).
      bool leader_alive = kill(pgid, 0) == 0;
      bool ours = leader_alive ? ProcessStartTime(pgid) == start : kill(-pgid, 0) == 0;
      if (ours && killpg(pgid, SIGKILL) == 0) {
        ++killed;
        spdlog::info("nexec agent: killed process group {} (task {}) left by a previous agent", pgid, key);
      }
    }
    // The task ended (killed now, or earlier with an exit code nobody saw): the master hears
    // so in the first heartbeat, and a launch of the same attempt is not run again, so no
    // attempt runs twice on this host. One that had ended by itself (its exit journaled,
    // not yet taken by the master) is reported with its own exit code.
    std::vector<std::string> parts = absl::StrSplit(key, '.');
    pb::TaskReport r;
    int64_t job = 0;
    int task = 0, attempt = 0;
    if (parts.size() == 3 && absl::SimpleAtoi(parts[0], &job) && absl::SimpleAtoi(parts[1], &task) &&
        absl::SimpleAtoi(parts[2], &attempt)) {
      r.set_job_id(job);
      r.set_task_index(task);
      r.set_attempt(attempt);
      r.set_state(pb::TASK_EXITED);
      r.set_exit_code(recorded.exit_code.value_or(128 + SIGKILL));
      r.set_ended_by_agent_restart(!recorded.exit_code.has_value());
      absl::MutexLock lock(&mu_);
      book_.Inherit(key, r);
    }
    // Kept in the journal, now as exited, until the master takes the report: a second
    // crash loses none.
    if (absl::Status exited = journal_->Exited({{key, recorded.exit_code.value_or(128 + SIGKILL)}}); !exited.ok()) {
      return exited;
    }
  }
  return killed;
}

std::vector<CharDevice> Agent::GpuDevicesNotHeld(const std::vector<int>& held) {
  std::vector<int> host;
  {
    absl::MutexLock lock(&mu_);
    host.assign(base_info_.gpus().begin(), base_info_.gpus().end());
  }
  std::vector<CharDevice> denied;
  for (int gpu : host) {
    if (std::find(held.begin(), held.end(), gpu) != held.end()) continue;
    const std::string node = absl::StrReplaceAll(options_.gpu_device, {{"{index}", absl::StrCat(gpu)}});
    struct stat st {};
    if (stat(node.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) {
      denied.push_back({static_cast<uint32_t>(major(st.st_rdev)), static_cast<uint32_t>(minor(st.st_rdev))});
    }
  }
  return denied;
}

// What the task runner starts for a launch: the request's command, account, files and
// resources, with what nexec-run inside the task needs to reach the master.
TaskLaunch Agent::TaskOf(const pb::LaunchRequest& req, const std::string& key) {
  TaskLaunch t;
  t.key = key;
  t.command = req.command();
  t.user = req.user();
  t.env = {req.env().begin(), req.env().end()};
  t.cwd = req.cwd();
  t.gpus = {req.gpus().begin(), req.gpus().end()};
  t.hosts = {req.hosts().begin(), req.hosts().end()};
  t.stdout_path = req.stdout_path();
  t.stderr_path = req.stderr_path();
  t.job_id = absl::StrCat(req.job_id());
  t.stdin_pipe = req.interactive() || req.tty();
  t.tty = req.tty();
  t.tty_rows = req.tty_rows();
  t.tty_cols = req.tty_cols();
  // What nexec-run inside the task needs to reach the master, as the agent does.
  t.env["NEXEC_MASTER"] = masters_->Joined();
  t.env["NEXEC_MASTER_UID"] = absl::StrCat(options_.master_uid);  // whose answers nexec-run believes
  t.env["NEXEC_TASK_INDEX"] = absl::StrCat(req.task_index());
  t.env["NEXEC_AGENT_STATE"] = options_.state_dir;  // whose task it is, for a successor agent
  if (!options_.auth.socket().empty()) t.env["NEXEC_MUNGE_SOCKET"] = options_.auth.socket();
  if (!req.event_file().empty()) t.env["NEXEC_EVENT_FILE"] = req.event_file();
  bool multi_host = false;
  for (const auto& h : req.hosts()) multi_host |= h != req.hosts(0);
  if (multi_host && !t.stdout_path.empty()) t.hostfile_path = t.stdout_path + ".hosts";
  t.output_root = req.output_root();
  t.memory_limit_mb = req.memory_limit_mb();
  t.pids_limit = req.pids_limit();
  t.denied_devices = GpuDevicesNotHeld(t.gpus);
  t.image = req.image();
  t.read_only_dirs = {req.read_only_dirs().begin(), req.read_only_dirs().end()};
  t.gpu_uuids = gpu_watch_.UuidsOf(t.gpus);
  return t;
}

absl::Status Agent::CheckServedLocked(const std::string& identity, int64_t term) {
  if (identity.empty()) return absl::OkStatus();  // root's own caller, not a master
  if (identity != master_identity_) {
    return absl::AbortedError(absl::StrCat("the agent on ", options_.host, " serves the master of store ",
                                           master_identity_.empty() ? "(none yet)" : master_identity_, ", not ",
                                           identity, ": its tasks are not that store's"));
  }
  if (term < master_term_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the agent on ", options_.host, " has heard from the master of term ", master_term_,
        ": a master of term ", term, " ", kStaleTermWords, " (it lost the store's lease) and acts on nothing here"));
  }
  RaiseTermLocked(term);
  return absl::OkStatus();
}

void Agent::RaiseTermLocked(int64_t term) {
  if (term <= master_term_ || master_identity_.empty()) return;
  spdlog::info("nexec agent {}: the master of term {} leads (was term {})", options_.host, term, master_term_);
  master_term_ = term;
  // On disk for a restarted agent (which has ended its tasks, and is told the term again by
  // the leader when it first heartbeats): a failed write costs nothing while this agent
  // runs, as memory holds the term.
  if (absl::Status kept = RecordServedLocked(master_identity_, master_term_); !kept.ok()) {
    spdlog::error("nexec agent {}: {}", options_.host, std::string(kept.message()));
  }
}

absl::Status Agent::RecordServedLocked(const std::string& identity, int64_t term) {
  const std::filesystem::path path = std::filesystem::path(options_.state_dir) / "master.identity";
  const std::string tmp = path.string() + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  const std::string line = absl::StrCat(identity, " ", term, "\n");
  const bool written = fd >= 0 && write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                       fsync(fd) == 0;
  if (fd >= 0) close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("the agent cannot record the master store it serves in ",
                                               path.string(), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status Agent::ServeMasterLocked(const std::string& identity) {
  if (identity == master_identity_) return absl::OkStatus();
  // Made by a master as 16 hex digits: anything else (empty, a line break, megabytes) is
  // no store to serve.
  if (identity.empty() || identity.size() > 64 ||
      !std::all_of(identity.begin(), identity.end(), [](char c) { return absl::ascii_isxdigit(c); })) {
    return absl::InvalidArgumentError(absl::StrCat("\"", absl::CHexEscape(identity.substr(0, 64)),
                                                   "\" is not a master store identity"));
  }
  if (!master_identity_.empty() && !book_.running().empty()) {
    // Its job 7 is not ours: the tasks of the store served run on, and this master waits.
    return absl::AbortedError(absl::StrCat(
        "the agent on ", options_.host, " serves the master of store ", master_identity_, " and runs ",
        book_.running().size(), " of its task(s); the master of store ", identity,
        " is refused until they end (two masters with different stores on one host?), or until the agent "
        "restarts, which ends them"));
  }
  if (!master_identity_.empty() && book_.own_exits() > 0) {
    // Exits its own master has not taken: dropped, they would be lost (a task that ran is
    // failed as its host's, attacker helper-41 found, with another store's master relayed
    // at a down master's address). They wait for that master; a restart of the agent is
    // the operator's way to move on (what a predecessor left goes at a change of store).
    return absl::AbortedError(absl::StrCat(
        "the agent on ", options_.host, " serves the master of store ", master_identity_, " and holds ",
        book_.own_exits(), " exit(s) of its tasks that master has not taken; the master of store ", identity,
        " is refused until it does, or until the agent restarts"));
  }
  // Kept on disk before anything of the new store runs: a restarted agent knows whose its
  // journal's tasks were. The new store's terms start over.
  JC_RETURN_IF_ERROR(RecordServedLocked(identity, 0));
  if (master_identity_.empty()) {
    // An agent from before store identities: what its journal left is of no store it can
    // name, and goes (its first master applies its host rules to anything it had here).
    spdlog::info("nexec agent {}: serves the master of store {}", options_.host, identity);
  } else {
    spdlog::warn("nexec agent {}: now serves the master of store {} (was {}, none of whose tasks runs here); what "
                 "it remembered of that store's tasks is dropped",
                 options_.host, identity, master_identity_);
  }
  // The old store's exits not taken are dropped, from the journal too (a successor must not
  // report them to the new store).
  std::vector<std::string> dropped;
  for (const pb::TaskReport& r : book_.exits()) dropped.push_back(TaskKey(r.job_id(), r.task_index(), r.attempt()));
  if (absl::Status s = journal_->Ended(dropped); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("the agent cannot drop the old store's tasks from its journal: ",
                                               s.message()));
  }
  book_.ForgetStore();
  ++serving_epoch_;
  master_identity_ = identity;
  master_term_ = 0;
  refused_identity_.clear();
  return absl::OkStatus();
}

absl::StatusOr<int> Agent::Launch(const pb::LaunchRequest& req) {
  std::vector<absl::StatusOr<int>> pids = LaunchBatch({&req});
  return std::move(pids[0]);
}

std::vector<absl::StatusOr<int>> Agent::LaunchBatch(const std::vector<const pb::LaunchRequest*>& requests) {
  std::vector<absl::StatusOr<int>> pids(requests.size(), absl::InternalError("not launched"));
  struct Admitted {
    size_t index;
    std::string key;
    TaskLaunch first;
  };
  std::vector<Admitted> admitted;
  std::vector<std::string> keys;
  for (size_t i = 0; i < requests.size(); ++i) {
    std::string key = TaskKey(requests[i]->job_id(), requests[i]->task_index(), requests[i]->attempt());
    std::optional<int> known;
    absl::StatusOr<TaskLaunch> first;
    try {
      first = AdmitLaunch(*requests[i], key, &known);
    } catch (const std::exception& e) {
      spdlog::error("launch of job {} threw: {}", requests[i]->job_id(), e.what());
      first = absl::InternalError(e.what());
    }
    if (!first.ok()) {
      pids[i] = first.status();
    } else if (known) {
      pids[i] = *known;
    } else {
      keys.push_back(key);
      admitted.push_back({i, std::move(key), std::move(*first)});
    }
  }
  // Recorded before they start (process groups still unknown), the batch's lines in one
  // write: an agent that dies between starting a task and recording its group leaves the
  // mark, and its successor knows the attempt was (perhaps) started and never starts it again.
  if (absl::Status marked = journal_->Starting(keys); !marked.ok()) {
    absl::MutexLock lock(&mu_);
    for (const Admitted& a : admitted) {
      book_.Drop(a.key);
      bound_cpus_.erase(a.key);
      pids[a.index] = absl::UnavailableError(absl::StrCat("the agent cannot record the task: ", marked.message()));
    }
    return pids;
  }
  for (const Admitted& a : admitted) pids[a.index] = StartAdmitted(a.key, a.first);
  return pids;
}

absl::StatusOr<TaskLaunch> Agent::AdmitLaunch(const pb::LaunchRequest& req, const std::string& key,
                                              std::optional<int>* known) {
  {
    absl::MutexLock lock(&mu_);
    // The store served is the one its own master (--master) names in heartbeat answers;
    // a launch never changes it (a stale master at another address would take the host).
    if (req.master_identity().empty()) {
      return absl::InvalidArgumentError("a launch names no master store (master_identity)");
    }
    if (master_identity_.empty()) {
      // Not yet heard its master: the launch is sent again after the next heartbeat.
      return absl::UnavailableError(absl::StrCat("the agent on ", options_.host,
                                                 " has not yet heard which store its master serves"));
    }
    JC_RETURN_IF_ERROR(CheckServedLocked(req.master_identity(), req.master_term()));
    if (book_.Knows(key)) {
      // The master may repeat a launch it is not sure about; the task already ran or
      // runs, and its outcome reaches the master in a heartbeat.
      auto pid = runner_.Pid(key);
      *known = pid ? *pid : 0;
      return TaskLaunch{};
    }
  }
  TaskLaunch t = TaskOf(req, key);
  // Registered before the process starts: a task that exits at once is reaped by the
  // heartbeat loop, which must already know whose it is.
  TaskInfo info{req.job_id(), req.task_index(), req.attempt(), t.stdout_path, t.stderr_path};
  info.gpus = t.gpus;
  info.post_exec = req.post_exec();
  info.suspend_action = req.suspend_action();
  info.resume_action = req.resume_action();
  info.kill_action = req.kill_action();
  if (req.kill_grace_seconds() > 0) info.kill_grace_seconds = req.kill_grace_seconds();
  if (!req.event_file().empty()) {
    // Elastic jobs: the file exists, empty, before the job starts (a new attempt starts
    // over), readable by the job's user, who tails it for resize events.
    auto created = CreateEventFile(req.event_file(), req.user(), req.output_root());
    if (!created.ok()) return created.status();
    info.event_file = req.event_file();
    info.event_fd = std::move(*created);
  }
  if (req.bind_cpus()) {
    int slots_here = static_cast<int>(std::count(req.hosts().begin(), req.hosts().end(), options_.host));
    absl::MutexLock lock(&mu_);
    t.cpus = ChooseCpus(std::max(1, slots_here));
    bound_cpus_[key] = t.cpus;
  }
  TaskLaunch first = t;
  info.command = std::move(t);
  if (!req.pre_exec().empty()) {
    first.stdin_pipe = first.tty = false;  // the submitter's input is for the command
    // The pre-exec runs first, as the task would (user, environment, directory, output);
    // the command starts when it exits 0.
    info.phase = TaskInfo::Phase::kPre;
    first.command = req.pre_exec();
    info.pre_exec_timeout_seconds = req.pre_exec_timeout_seconds();
    if (req.pre_exec_timeout_seconds() > 0) {
      info.pre_exec_deadline = absl::Now() + absl::Seconds(req.pre_exec_timeout_seconds());
    }
  }
  {
    absl::MutexLock lock(&mu_);
    // A heartbeat may have moved the agent to another store meanwhile (with nothing running).
    if (req.master_identity() != master_identity_) {
      bound_cpus_.erase(key);
      return absl::AbortedError(absl::StrCat("the agent on ", options_.host, " now serves the master of store ",
                                             master_identity_, ", not ", req.master_identity()));
    }
    // Or heard from a newer leader meanwhile.
    if (absl::Status current = CheckServedLocked(req.master_identity(), req.master_term()); !current.ok()) {
      bound_cpus_.erase(key);
      return current;
    }
    book_.Add(key, std::move(info));
  }
  return first;
}

absl::StatusOr<int> Agent::StartAdmitted(const std::string& key, const TaskLaunch& first) {
  absl::StatusOr<pid_t> pid;
  try {
    pid = StartProcess(first);
  } catch (const std::exception& e) {
    spdlog::error("task {}: its start threw: {}", key, e.what());
    pid = absl::InternalError(e.what());
  }
  if (metrics_) (pid.ok() || absl::IsAlreadyExists(pid.status()) ? metrics_->launches_ok : metrics_->launches_refused)->Increment();
  if (!pid.ok()) {
    if (absl::IsAlreadyExists(pid.status())) return 0;  // a concurrent repeat started it
    (void)journal_->Ended(key);  // never started: a successor that still reads it finds no process
    absl::MutexLock lock(&mu_);
    book_.Drop(key);
    bound_cpus_.erase(key);
    // Aborted is the answer that names another store (the master requeues and avoids the
    // host); a child that failed before exec is a passing failure, sent again.
    if (absl::IsAborted(pid.status())) return absl::UnavailableError(pid.status().message());
    return pid.status();
  }
  return static_cast<int>(*pid);
}

std::vector<int> Agent::ChooseCpus(int n) const {
  // The cores this agent may use (a container's or cgroup's cpuset may be fewer than the
  // machine's), the least used by bound tasks first.
  std::vector<int> cores;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cores.push_back(c);
    }
  }
  if (cores.empty()) cores.push_back(0);
  std::map<int, int> use;
  for (const auto& [key, cpus] : bound_cpus_) {
    for (int c : cpus) ++use[c];
  }
  std::stable_sort(cores.begin(), cores.end(), [&](int a, int b) { return use[a] < use[b]; });
  cores.resize(std::min(static_cast<size_t>(n), cores.size()));  // more slots than cores: every core
  std::sort(cores.begin(), cores.end());
  return cores;
}

absl::StatusOr<pid_t> Agent::StartProcess(const TaskLaunch& launch) {
  auto pid = runner_.Launch(launch);
  if (!pid.ok()) return pid;
  // Its process group goes into the journal at the heartbeat loop's second round from now
  // (15–30 ms on), if it still runs then: reading a new process's start time
  // (/proc/<pid>/stat: two procfs inodes made and dropped) cost ~1.5% of all CPU with
  // thousands of short tasks a second, most of which end by then (at the next round, a
  // task started just before it had not: 2% of an agent's CPU, issue 48). Until then its
  // "S" line stands, and a successor of an agent that died meanwhile finds it by its
  // environment.
  absl::MutexLock lock(&starts_mu_);
  unrecorded_starts_[launch.key] = *pid;
  return pid;
}

void Agent::RecordStartsLocked() {
  std::map<std::string, pid_t> started;
  started.swap(aging_starts_);
  {
    absl::MutexLock lock(&starts_mu_);
    aging_starts_.swap(unrecorded_starts_);
  }
  for (const auto& [key, pid] : started) {
    // Ended (its "E" line is written) or in a later phase (recorded with that one): none.
    // A process not yet reaped keeps its pid, so the start time read is its own.
    if (!book_.running().count(key) || runner_.Pid(key) != std::optional<pid_t>(pid)) continue;
    // The task's process group, with its leader's start time (so that a pid reused by
    // another program is never taken for it), for an agent that restarts after a crash.
    if (absl::Status recorded = journal_->Started(key, pid, ProcessStartTime(pid)); !recorded.ok()) {
      // It runs: its "S" line stands, and a successor finds it by its environment.
      spdlog::error("task {}: {}", key, std::string(recorded.message()));
    }
  }
}

bool Agent::NextPhase(const std::string& key, TaskInfo& t, int exit_code, pb::TaskReport* report) {
  report->set_job_id(t.job_id);
  report->set_task_index(t.task_index);
  report->set_attempt(t.attempt);
  report->set_state(pb::TASK_EXITED);
  report->set_exit_code(exit_code);
  // Started by the phase starter, not here: this is the heartbeat loop, under mu_.
  auto start = [&](TaskLaunch launch, TaskInfo::Phase phase) {
    launch.key = key;
    t.phase = phase;
    t.starting = true;
    phase_starts_.push_back(PhaseStart{key, std::move(launch), phase});
    cv_.SignalAll();
    return true;
  };
  switch (t.phase) {
    case TaskInfo::Phase::kPre:
      if (exit_code == 0 && !t.pre_exec_timed_out) return start(t.command, TaskInfo::Phase::kCommand);
      report->set_pre_exec_failed(true);
      report->set_message(t.pre_exec_timed_out
                              ? absl::StrCat("pre-exec timed out after ", t.pre_exec_timeout_seconds, " s")
                              : absl::StrCat("pre-exec exited ", exit_code));
      return false;
    case TaskInfo::Phase::kCommand:
      if (t.post_exec.empty()) return false;
      t.command_exit = exit_code;
      {
        TaskLaunch post = t.command;
        post.command = t.post_exec;
        post.stdin_pipe = post.tty = false;
        return start(std::move(post), TaskInfo::Phase::kPost);
      }
    case TaskInfo::Phase::kPost:
      report->set_exit_code(t.command_exit);
      if (exit_code != 0) {
        pb::TaskNote note;
        note.set_job_id(t.job_id);
        note.set_task_index(t.task_index);
        note.set_attempt(t.attempt);
        note.set_message(absl::StrCat("post-exec exited ", exit_code));
        book_.AddNote(note);
      }
      return false;
  }
  return false;
}

void Agent::PhaseStarterLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && phase_starts_.empty()) cv_.Wait(&mu_);
    if (stopping_) return;
    PhaseStart next = std::move(phase_starts_.front());
    phase_starts_.pop_front();
    auto queued = book_.running().find(next.key);
    if (queued == book_.running().end()) continue;
    if (runner_.TakeKillWhenStarted(next.key)) {
      // Killed while its start waited here (attacker helper-83: it ran once the queue moved,
      // the kill lost): the phase counts as killed (137), and what follows a killed phase
      // follows — a command's post-exec runs, "whatever its exit, a kill included".
      queued->second.starting = false;
      pb::TaskReport r;
      if (!NextPhase(next.key, queued->second, 128 + SIGKILL, &r)) EndTaskLocked(next.key, r);
      continue;
    }
    mu_.Unlock();
    absl::StatusOr<pid_t> pid = absl::InternalError("not started");
    try {
      pid = StartProcess(next.launch);
    } catch (const std::exception& e) {
      pid = absl::InternalError(e.what());
    }
    mu_.Lock();
    if (auto it = book_.running().find(next.key); it != book_.running().end()) it->second.starting = false;
    if (pid.ok()) continue;  // its exit is reaped and recorded as any phase's
    const bool post = next.phase == TaskInfo::Phase::kPost;
    spdlog::warn("task {}: cannot start its {}: {}", next.key, post ? "post-exec" : "command",
                 std::string(pid.status().message()));
    auto it = book_.running().find(next.key);
    if (it == book_.running().end()) continue;
    const TaskInfo& t = it->second;
    pb::TaskReport r;
    r.set_job_id(t.job_id);
    r.set_task_index(t.task_index);
    r.set_attempt(t.attempt);
    r.set_state(pb::TASK_EXITED);
    // As NextPhase said before the start moved here: a command that could not start is
    // 127, as the shell's; a post-exec's failure leaves the command's own exit.
    r.set_exit_code(post ? t.command_exit : 127);
    EndTaskLocked(next.key, r);
  }
}

void Agent::EndTaskLocked(const std::string& key, const pb::TaskReport& report) {
  book_.AddExit(report);
  bound_cpus_.erase(key);
  if (absl::Status s = journal_->Exited({{key, report.exit_code()}}); !s.ok()) {
    spdlog::error("task {}: {}", key, std::string(s.message()));
  }
  book_.Finish(key);
  exits_added_ = true;
}

void Agent::ProbeGpusAgain() {
  pb::AgentInfo base;
  {
    absl::MutexLock lock(&mu_);
    base = base_info_;
  }
  std::optional<pb::AgentInfo> info = gpu_watch_.ProbeAgain(std::move(base), [&](pb::AgentInfo* host) {
    JC_RETURN_IF_ERROR(ApplyDeclaredResources(options_.declared, host));
    for (const auto& [k, v] : options_.resources) (*host->mutable_resources())[k] = v;
    return absl::OkStatus();
  });
  if (!info) return;
  absl::MutexLock lock(&mu_);
  base_info_ = std::move(*info);
  last_info_.reset();  // the next heartbeat says so
}

void Agent::WatchGpus() {
  std::optional<GpuSnapshot> sample = gpu_watch_.Sample();
  if (!sample) return;
  std::vector<std::string> kill;
  absl::MutexLock lock(&mu_);
  std::vector<GpuWatch::TaskGpus> tasks;
  for (const auto& [key, t] : book_.running()) {
    tasks.push_back({key, runner_.Pid(key), t.gpus, t.misused, t.job_id, t.task_index, t.attempt});
  }
  GpuWatch::Assessment found = GpuWatch::Assess(*sample, tasks, options_.kill_gpu_misuse);
  for (const GpuWatch::Misuse& m : found.misuse) {
    TaskInfo& t = book_.running().at(m.key);
    t.misused.insert(m.gpu);
    spdlog::warn("job {} task {}: {}", t.job_id, t.task_index, m.note.message());
    book_.AddNote(m.note);
    if (options_.kill_gpu_misuse) kill.push_back(m.key);
  }
  for (auto& [key, t] : book_.running()) {
    const GpuWatch::Assessment::Use& use = found.use[key];
    t.gpu_memory_mb = use.memory_mb;
    t.gpu_utilization = use.utilization;
  }
  for (const auto& key : kill) runner_.Kill(key).IgnoreError();  // its exit is reaped and reported as usual
}

void Agent::EnableMetrics(prometheus::Registry& registry) {
  auto& heartbeats = prometheus::BuildCounter()
                         .Name("nexec_agent_heartbeats_total")
                         .Help("Heartbeats sent to the master, by result")
                         .Register(registry);
  auto& launches = prometheus::BuildCounter()
                       .Name("nexec_agent_launches_total")
                       .Help("Task launches from the master, by result")
                       .Register(registry);
  auto& tasks = prometheus::BuildGauge().Name("nexec_agent_tasks").Help("Tasks running on this host").Register(registry);
  auto& last = prometheus::BuildGauge()
                   .Name("nexec_agent_last_heartbeat_timestamp_seconds")
                   .Help("When the master last took a heartbeat (Unix time)")
                   .Register(registry);
  metrics_ = std::make_unique<Metrics>(Metrics{&heartbeats.Add({{"result", "ok"}}), &heartbeats.Add({{"result", "error"}}),
                                               &launches.Add({{"result", "started"}}),
                                               &launches.Add({{"result", "refused"}}), &tasks.Add({}), &last.Add({})});
}

absl::Status Agent::Ready() {
  if (masters_ == nullptr) return absl::UnavailableError("the agent has not started");
  absl::MutexLock lock(&mu_);
  absl::Duration limit = std::max(3 * options_.heartbeat_interval, absl::Seconds(5));
  if (absl::Now() - last_accepted_heartbeat_ <= limit) return absl::OkStatus();
  return absl::UnavailableError(
      last_accepted_heartbeat_ == absl::InfinitePast()
          ? absl::StrCat("the master at ", masters_->Joined(), " has not taken a heartbeat yet")
          : absl::StrCat("the master at ", masters_->Joined(), " has taken no heartbeat since ",
                         absl::FormatTime(last_accepted_heartbeat_)));
}

absl::StatusOr<TaskLaunch> Agent::ActionLaunch(const std::string& key, TaskInfo& t, const std::string& action) {
  auto pid = runner_.Pid(key);
  if (!pid) return absl::NotFoundError(absl::StrCat("task ", key, " has no process to act on"));
  // Started like a task of its own (the job's user, environment and output), so its end is
  // reaped and dropped; it acts on the task through NEXEC_TASK_PGID.
  TaskLaunch a = t.command;
  a.key = absl::StrCat(key, ".action", ++t.actions_run);
  a.command = action;
  a.cpus.clear();
  a.env["NEXEC_TASK_PGID"] = absl::StrCat(*pid);
  return a;
}

absl::Status Agent::RunAction(const TaskLaunch& a) {
  auto started = runner_.Launch(a);
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        absl::StrCat("the job control action could not start: ", started.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Agent::SendInput(const pb::InputRequest& req) {
  const std::string key = TaskKey(req.job_id(), req.task_index(), req.attempt());
  {
    absl::MutexLock lock(&mu_);
    JC_RETURN_IF_ERROR(CheckServedLocked(req.master_identity(), req.master_term()));
    auto it = book_.running().find(key);
    if (it == book_.running().end()) {
      return absl::FailedPreconditionError(absl::StrCat("task ", key, " does not run on ", options_.host));
    }
    if (it->second.phase != TaskInfo::Phase::kCommand || it->second.starting) {
      // Its pre-exec runs (or its post-exec), or its command is still starting: input waits.
      return absl::UnavailableError(absl::StrCat("job ", req.job_id(), "'s command has not started yet"));
    }
  }
  if (req.rows() > 0 && req.cols() > 0) {
    auto sized = runner_.SetTerminalSize(key, req.rows(), req.cols());
    if (!sized.ok()) spdlog::debug("task {}: {}", key, sized.ToString());  // a pipe has no size
  }
  size_t accepted = 0;
  if (!req.data().empty()) {
    JC_ASSIGN_OR_RETURN(accepted, runner_.WriteInput(key, req.data(), absl::Seconds(5)));
  }
  if (req.eof() && accepted == req.data().size()) JC_RETURN_IF_ERROR(runner_.CloseInput(key));
  return static_cast<int64_t>(accepted);
}

absl::StatusOr<exec_stream::AttachedCommand> Agent::StartExec(const pb::ExecStart& start, std::string* key) {
  JC_RETURN_IF_ERROR(exec_stream::CheckCommand(start.command()));
  *key = TaskKey(start.job_id(), start.task_index(), start.attempt());
  TaskLaunch launch;
  {
    absl::MutexLock lock(&mu_);
    JC_RETURN_IF_ERROR(CheckServedLocked(start.master_identity(), start.master_term()));
    auto it = book_.running().find(*key);
    if (it == book_.running().end()) {
      return absl::FailedPreconditionError(absl::StrCat("task ", *key, " does not run on ", options_.host));
    }
    if (it->second.phase == TaskInfo::Phase::kPre) {
      return absl::UnavailableError(absl::StrCat("job ", start.job_id(), "'s command has not started yet (its pre-exec runs)"));
    }
    if (it->second.phase == TaskInfo::Phase::kPost) {
      return absl::FailedPreconditionError(absl::StrCat("job ", start.job_id(), "'s command has ended (its post-exec runs)"));
    }
    launch = it->second.command;
  }
  launch.key = *key;
  const std::vector<std::string> command(start.command().begin(), start.command().end());
  JC_ASSIGN_OR_RETURN(exec_stream::CommandPlan plan, runner_.PlanExec(launch, command, start.tty()));
  JC_ASSIGN_OR_RETURN(exec_stream::AttachedCommand started,
                      exec_stream::StartAttached(plan, start.tty(), start.rows(), start.cols()));
  std::string argv = nlohmann::json(command).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  spdlog::info("exec in task {} as {}{}: {}{}", *key, launch.user.empty() ? "the agent's account" : launch.user,
               start.tty() ? " (tty)" : "", argv.substr(0, 400), argv.size() > 400 ? " ..." : "");
  return started;
}

absl::Status Agent::NotifyLocked(const pb::SignalRequest& req) {
  // Task 0 of the job's newest attempt here (an older one may not have been reaped yet).
  std::map<std::string, TaskInfo>& tasks = book_.running();
  auto it = tasks.end();
  for (auto t = tasks.begin(); t != tasks.end(); ++t) {
    if (t->second.job_id != req.job_id() || t->second.task_index != 0) continue;
    if (it == tasks.end() || t->second.attempt > it->second.attempt) it = t;
  }
  if (it == tasks.end() || it->second.event_file.empty()) {
    return absl::NotFoundError(absl::StrCat("job ", req.job_id(), " has no event file on ", options_.host));
  }
  TaskInfo& t = it->second;
  if (t.events_written >= req.events_size()) return absl::OkStatus();
  std::string lines;
  for (int i = t.events_written; i < req.events_size(); ++i) absl::StrAppend(&lines, req.events(i), "\n");
  // One append per notification: a reader never sees half a line. Through the descriptor
  // opened as the user when the task started (or, for a task an earlier agent started, one
  // opened as the user now), never by path as root.
  if (!t.event_fd) {
    auto account = LookupAccount(t.command.user);
    if (!account.ok()) return account.status();
    auto fd = OpenRegularTaskFile(*account, t.event_file, O_WRONLY | O_APPEND, 0600, t.command.output_root);
    if (!fd.ok()) return fd.status();
    t.event_fd = std::make_shared<OwnedFd>(std::move(*fd));
  }
  const ssize_t n = write(t.event_fd->get(), lines.data(), lines.size());
  const int err = errno;
  if (n != static_cast<ssize_t>(lines.size())) {
    return absl::InternalError(absl::StrCat("cannot append to ", t.event_file, ": ", std::strerror(err)));
  }
  t.events_written = req.events_size();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Agent::Lead(const pb::LeadRequest& req) {
  absl::MutexLock lock(&mu_);
  if (req.master_identity().empty()) return absl::InvalidArgumentError("a leader names its store (master_identity)");
  JC_RETURN_IF_ERROR(CheckServedLocked(req.master_identity(), req.master_term()));
  return master_term_;
}

absl::Status Agent::Signal(const pb::SignalRequest& req) {
  {
    absl::MutexLock lock(&mu_);
    JC_RETURN_IF_ERROR(CheckServedLocked(req.master_identity(), req.master_term()));
  }
  if (req.action() == pb::SignalRequest::NOTIFY) {
    absl::MutexLock lock(&mu_);
    return NotifyLocked(req);
  }
  if (req.action() == pb::SignalRequest::SIGNAL && (req.signal() <= 0 || req.signal() >= NSIG)) {
    return absl::InvalidArgumentError(absl::StrCat("no signal ", req.signal()));
  }
  // The task named, or with task_index -1 every task of the job here but task 0 (which
  // the master signals on its own, first).
  std::vector<std::string> keys;
  std::vector<TaskLaunch> actions;
  absl::Status outcome;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [k, t] : book_.running()) {
      if (t.job_id != req.job_id()) continue;
      if (req.task_index() >= 0 ? t.task_index != req.task_index() : t.task_index == 0) continue;
      if (req.action() == pb::SignalRequest::SUSPEND) t.suspended = true;
      if (req.action() == pb::SignalRequest::RESUME) t.suspended = false;
      // The queue's job controls, where it has them, instead of the signals.
      const std::string& action = req.action() == pb::SignalRequest::SUSPEND  ? t.suspend_action
                                  : req.action() == pb::SignalRequest::RESUME ? t.resume_action
                                  : req.action() == pb::SignalRequest::KILL   ? t.kill_action
                                                                              : std::string();
      if (action.empty()) {
        keys.push_back(k);
        continue;
      }
      if (req.action() == pb::SignalRequest::KILL) t.kill_deadline = absl::Now() + absl::Seconds(t.kill_grace_seconds);
      if (absl::StatusOr<TaskLaunch> a = ActionLaunch(k, t, action); a.ok()) {
        actions.push_back(std::move(*a));
      } else {
        outcome = a.status();
      }
      keys.emplace_back();  // acted on
    }
  }
  // Started without mu_: a start may take up to --task_start_timeout (helper-82).
  for (const TaskLaunch& a : actions) {
    if (absl::Status ran = RunAction(a); !ran.ok()) outcome = ran;
  }
  if (keys.empty()) {
    return absl::NotFoundError(absl::StrCat("job ", req.job_id(),
                                            req.task_index() >= 0 ? absl::StrCat(" task ", req.task_index()) : "",
                                            " does not run on ", options_.host));
  }
  for (const std::string& key : keys) {
    if (key.empty()) continue;
    absl::Status sent;
    switch (req.action()) {
      case pb::SignalRequest::SUSPEND: sent = runner_.Suspend(key); break;
      case pb::SignalRequest::RESUME: sent = runner_.Resume(key); break;
      case pb::SignalRequest::KILL:
        sent = runner_.Kill(key);
        if (absl::IsNotFound(sent)) {
          // Registered here, not handed to the runner yet (a stop right after the launch):
          // killed the moment it starts.
          runner_.KillWhenStarted(key);
          sent = absl::OkStatus();
        }
        break;
      case pb::SignalRequest::SIGNAL: sent = runner_.Signal(key, req.signal()); break;
      default: return absl::InvalidArgumentError("unknown signal action");
    }
    if (!sent.ok()) outcome = sent;
  }
  return outcome;
}

absl::StatusOr<std::string> Agent::ReadLog(const pb::ReadLogRequest& req, int64_t max_bytes) {
  std::string path, user, output_root;
  {
    absl::MutexLock lock(&mu_);
    // Reading changes nothing: any master of the store served may (terms fence actions).
    JC_RETURN_IF_ERROR(CheckServedLocked(req.master_identity(), master_term_));
    const TaskInfo* t = book_.LogOf(req.job_id(), req.task_index());
    if (t == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no output of job ", req.job_id(), " task ", req.task_index(), " on ", options_.host));
    }
    path = req.stderr() ? t->stderr_path : t->stdout_path;
    user = t->command.user;
    output_root = t->command.output_root;
  }
  // Read as the job's user: the path is the user's, and root reading it would hand any
  // file a link there names to whoever asks for the job's output.
  auto account = LookupAccount(user);
  if (!account.ok()) return account.status();
  // A non-root agent's in this call's thread: its wait is this call's alone, and a
  // follower's polls would each count against the account's cap of helpers.
  auto fd = OpenTaskFile(*account, path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, output_root,
                         OwnAccountOpen::kInCallingThread);
  if (!fd.ok()) return absl::NotFoundError(absl::StrCat("output: ", fd.status().message()));
  struct stat st{};
  if (fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("cannot read the output: ", path, " is not a regular file"));
  }
  std::string data(static_cast<size_t>(max_bytes), '\0');
  const ssize_t n = pread(fd->get(), data.data(), data.size(), req.offset());
  if (n < 0) return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  data.resize(static_cast<size_t>(n));
  return data;
}

void Agent::HeartbeatLoop() {
  absl::Time next = absl::InfinitePast();
  mu_.Lock();
  while (!stopping_) {
    // Exits are looked for often so the master hears of a finished task soon. A round
    // every 15 ms batches the exits of busy agents into one report: with thousands of
    // short tasks a second, 5 ms rounds cost 4% more CPU per job (more, smaller
    // heartbeats, each an RPC and a commit at the master), 30 ms rounds more again (a
    // longer tail), measured; waking on each SIGCHLD made more heartbeats still.
    const absl::Time round = absl::Now() + absl::Milliseconds(15);
    while (!stopping_ && !cv_.WaitWithDeadline(&mu_, round)) {
    }
    if (stopping_) break;
    mu_.Unlock();
    std::vector<TaskExit> exits = runner_.Reap();
    mu_.Lock();
    EnforceDeadlinesLocked();
    RecordExitsLocked(exits);
    RecordStartsLocked();
    bool periodic = absl::Now() >= next;
    if (exits.empty() && !periodic && !exits_added_) continue;
    exits_added_ = false;
    pb::HeartbeatRequest req = HeartbeatLocked(periodic);
    size_t sent_exits = book_.exits().size();
    const std::string sent_as = master_identity_;
    const uint64_t sent_epoch = serving_epoch_;
    mu_.Unlock();
    AddUsage(periodic, &req);
    size_t sent_notes = req.notes_size();
    pb::HeartbeatResponse resp;
    // To the master that leads, as far as this agent knows (one of several: the others
    // stand by and name it).
    const std::string address = masters_->Current();
    std::string leader_named;
    // The answer acks exits, binds this agent to a store and names tasks to kill: it counts
    // only when the master's account signed it (whoever listens at a master's address while
    // that master is down is ignored, and the next master is tried).
    // On the stream when there is one and this master serves it; else (or when it answers
    // that it serves none) by a call, as before.
    std::optional<grpc::Status> streamed;
    if (stream_ != nullptr) {
      // Asked again a minute later, or at the next heartbeat once a master of a later term
      // answered (below): a master restarted, as for an upgrade, may serve streams now.
      auto no_streams = unstreamed_.find(address);
      if (no_streams != unstreamed_.end() && absl::Now() >= no_streams->second.until) unstreamed_.erase(no_streams);
      if (unstreamed_.count(address) == 0) {
        streamed = stream_->Heartbeat(address, masters_->Stub(address), req, &resp, &leader_named, absl::Seconds(5));
        if (streamed->error_code() == grpc::StatusCode::UNIMPLEMENTED) {
          // A master of an earlier release, or run with --agent_streams=false: called.
          spdlog::info("nexec agent {}: the master at {} serves no agent streams; heartbeats are calls",
                       options_.host, address);
          unstreamed_[address] = {absl::Now() + absl::Minutes(1), std::nullopt};
          streamed.reset();
        }
      }
    }
    grpc::Status status;
    if (streamed) {
      status = *streamed;
    } else {
      MungeAuth::AnswerFrom from_master;
      from_master.response = &resp;
      from_master.uids = {options_.master_uid};
      status = options_.auth.Call(
          address, "Heartbeat", req, std::chrono::seconds(5),
          [&](grpc::ClientContext* ctx) {
            grpc::Status s = masters_->Stub(address)->Heartbeat(ctx, req, &resp);
            leader_named = MasterList::LeaderNamed(*ctx);
            return s;
          },
          &from_master);
      auto no_streams = unstreamed_.find(address);
      if (status.ok() && no_streams != unstreamed_.end()) {
        // The term of the master that answered the call (signed by the master's account):
        // the first one noted; a later one means a new master leads there.
        if (!no_streams->second.term) {
          no_streams->second.term = resp.master_term();
        } else if (resp.master_term() > *no_streams->second.term) {
          unstreamed_.erase(no_streams);
        }
      }
    }
    mu_.Lock();
    next = absl::Now() + options_.heartbeat_interval;
    if (metrics_) metrics_->tasks->Set(static_cast<double>(book_.running().size()));
    if (!status.ok()) {
      if (metrics_) metrics_->heartbeats_failed->Increment();
      // Another master may lead: its heartbeat goes at once when a standby named it.
      if (masters_->Failed(address, status, leader_named)) {
        // At once to the leader a standby named, but not twice in a row: the name is not
        // signed, and two squatters naming each other would have the agent call them in
        // a loop with no pause (attacker helper-60); a real standby's name is followed
        // at once, and if that fails too, at the next beat.
        if (!leader_named.empty() && !followed_leader_name_) {
          next = absl::Now();
          followed_leader_name_ = true;
        } else {
          followed_leader_name_ = false;
        }
        spdlog::warn("heartbeat to master {} failed ({}); trying {}", address, status.error_message(),
                     masters_->Current());
      } else {
        spdlog::warn("heartbeat to master {} failed: {}", address, status.error_message());
      }
      continue;
    }
    followed_leader_name_ = false;
    HeartbeatAnsweredLocked(resp, sent_as, sent_epoch, sent_exits, sent_notes);
  }
  mu_.Unlock();
}

// A pre-exec past its timeout is killed; its end is then a failed pre-exec. A task a kill
// action left running past its grace is killed. A kill that fails (NotFound: the task
// ended meanwhile, which its exit reports) is tried again a second later, not forgotten.
void Agent::EnforceDeadlinesLocked() {
  const absl::Time now = absl::Now();
  auto killed = [&](const std::string& key, const char* why) {
    absl::Status s = runner_.Kill(key);
    if (absl::IsNotFound(s)) {
      // Between two phases (its next one queued for the phase starter): killed as it starts.
      runner_.KillWhenStarted(key);
      return true;
    }
    if (s.ok()) return true;
    spdlog::warn("task {}: {}: the kill failed ({}); trying again in a second", key, why, s.ToString());
    return false;
  };
  for (auto& [key, t] : book_.running()) {
    if (now > t.kill_deadline) {
      spdlog::info("task {}: still running {} s after its kill action; killing it", key, t.kill_grace_seconds);
      t.kill_deadline = killed(key, "past its kill action's grace") ? absl::InfiniteFuture() : now + absl::Seconds(1);
    }
    if (t.phase == TaskInfo::Phase::kPre && !t.pre_exec_timed_out && now > t.pre_exec_deadline) {
      if (killed(key, "pre-exec past its timeout")) {
        t.pre_exec_timed_out = true;
      } else {
        t.pre_exec_deadline = now + absl::Seconds(1);
      }
    }
  }
}

// Tasks that ended: their next phase started (pre-exec, command, post-exec), or their
// report queued for the master with the final usage, and the journal told.
void Agent::RecordExitsLocked(const std::vector<TaskExit>& exits) {
  std::vector<std::pair<std::string, int>> ended;  // journaled together, in one write
  for (const TaskExit& e : exits) {
    auto it = book_.running().find(e.key);
    if (it == book_.running().end()) continue;
    if (!e.killed_because.empty()) {
      // The kernel ended it (its memory limit): the job's history and reason say so.
      pb::TaskNote note;
      note.set_job_id(it->second.job_id);
      note.set_task_index(it->second.task_index);
      note.set_attempt(it->second.attempt);
      note.set_message(e.killed_because);
      note.set_killed(true);
      book_.AddNote(note);
    }
    pb::TaskReport r;
    if (NextPhase(e.key, it->second, e.exit_code, &r)) continue;  // its next phase runs
    if (e.usage) {
      // Its final figures, for the job's metering (a task may end between heartbeats).
      auto* u = r.mutable_usage();
      u->set_cpu_seconds(e.usage->cpu_seconds);
      u->set_read_bytes(e.usage->read_bytes);
      u->set_write_bytes(e.usage->write_bytes);
      u->set_memory_peak_kb(e.usage->memory_peak_kb);
      u->set_rss_kb(e.usage->rss_kb);
    }
    book_.AddExit(r);
    bound_cpus_.erase(e.key);
    ended.emplace_back(e.key, r.exit_code());
    book_.Finish(e.key);
  }
  if (absl::Status s = journal_->Exited(ended); !s.ok()) {
    // Left "live" in the journal, a successor would kill nothing (their groups are gone)
    // and report them ended (killed), which the master ignores for attempts it knows ended.
    std::vector<std::string> keys;
    for (const auto& [key, code] : ended) keys.push_back(key);
    spdlog::error("tasks {}: {}", absl::StrJoin(keys, ", "), std::string(s.message()));
  }
}

// The heartbeat's host figures and every task's state (the running ones and the exits not
// yet acknowledged).
pb::HeartbeatRequest Agent::HeartbeatLocked(bool periodic) {
  pb::HeartbeatRequest req;
  // The host's figures (load, memory, sensors, images held) are read on the periodic
  // heartbeats; one sent at once for an exit repeats the last ones.
  const bool exits_only = !periodic && last_info_.has_value();
  if (!exits_only) last_info_ = CurrentInfo();
  *req.mutable_info() = *last_info_;
  req.mutable_info()->set_master_identity(master_identity_);  // every report below is that store's
  // Serving no store yet (new, or from before store identities): what it holds is of no
  // store it can name, and is not reported (the first answer binds it and drops that).
  if (master_identity_.empty()) return req;
  // Between the periodic heartbeats, one sent at once for exits carries only those: a
  // busy agent sends hundreds a second, and every running task in each would be read
  // again by the master for nothing (the periodic one, each second, reports them all).
  req.set_exits_only(exits_only);
  for (const auto& [key, t] : book_.running()) {
    if (exits_only) break;
    pb::TaskReport* r = req.add_tasks();
    r->set_job_id(t.job_id);
    r->set_task_index(t.task_index);
    r->set_attempt(t.attempt);
    r->set_state(t.suspended ? pb::TASK_SUSPENDED : pb::TASK_RUNNING);
    if (!t.event_file.empty()) r->set_events_written(t.events_written);
    auto pid = runner_.Pid(key);
    r->set_pid(pid ? *pid : 0);
  }
  for (const auto& r : book_.exits()) *req.add_tasks() = r;
  return req;
}

// Each running task's usage and GPU figures, and the notes not yet acknowledged. Takes mu_
// for the GPU figures only.
void Agent::AddUsage(bool periodic, pb::HeartbeatRequest* request) {
  pb::HeartbeatRequest& req = *request;
  // Usage is sampled from /proc in one pass, on the periodic heartbeats only: the ones
  // sent at once for an exit should cost nothing extra.
  std::map<std::string, TaskUsage> usages;
  if (periodic) usages = runner_.UsageAll();
  if (periodic && gpu_watch_.Watching()) WatchGpus();
  if (periodic && gpu_watch_.Reprobing()) ProbeGpusAgain();
  for (auto& r : *req.mutable_tasks()) {
    if (r.state() == pb::TASK_EXITED) continue;
    auto usage = usages.find(TaskKey(r.job_id(), r.task_index(), r.attempt()));
    if (usage == usages.end()) continue;
    auto* u = r.mutable_usage();
    u->set_cpu_seconds(usage->second.cpu_seconds);
    u->set_rss_kb(usage->second.rss_kb);
    u->set_swap_kb(usage->second.swap_kb);
    u->set_threads(usage->second.threads);
    u->set_read_bytes(usage->second.read_bytes);
    u->set_write_bytes(usage->second.write_bytes);
    u->set_processes(usage->second.processes);
    u->set_memory_peak_kb(usage->second.memory_peak_kb);
  }
  {
    absl::MutexLock gpu_lock(&mu_);
    for (auto& r : *req.mutable_tasks()) {
      if (r.state() == pb::TASK_EXITED) continue;
      auto t = book_.running().find(TaskKey(r.job_id(), r.task_index(), r.attempt()));
      if (t == book_.running().end()) continue;
      r.mutable_usage()->set_gpu_memory_mb(t->second.gpu_memory_mb);
      r.mutable_usage()->set_gpu_utilization(t->second.gpu_utilization);
    }
    for (const auto& n : book_.notes()) *req.add_notes() = n;
  }
}

// The master took the heartbeat: what it acknowledged is dropped, resize notifications are
// written, and tasks it no longer knows are killed (lock released around each kill).
void Agent::HeartbeatAnsweredLocked(const pb::HeartbeatResponse& resp, const std::string& sent_as,
                                    uint64_t sent_epoch, size_t sent_exits, size_t sent_notes) {
  if (sent_epoch != serving_epoch_) return;  // sent for a store no longer served: its answer is not ours
  if (!resp.master_identity().empty() && !sent_as.empty() && resp.master_identity() != sent_as) {
    // A master of another store answered: it took none of the reports (they are of the
    // store served), so nothing is acknowledged. It is served from now on once none of
    // the old store's tasks runs here (the old store's exits are then dropped with them).
    if (absl::Status serving = ServeMasterLocked(resp.master_identity()); !serving.ok()) {
      // Said once for each master and reason (tasks running, then exits not taken).
      const std::string said = absl::StrCat(resp.master_identity(), ": ", serving.message());
      if (refused_identity_ != said) {
        refused_identity_ = said;
        spdlog::error("nexec agent {}: {}", options_.host, std::string(serving.message()));
      }
    }
    return;
  }
  if (!sent_as.empty() && resp.master_term() < master_term_) {
    // A master that lost its lease (and does not know it yet) took this: the leader did
    // not, so nothing is acknowledged and none of its answer is acted on.
    if (stale_term_said_ != resp.master_term()) {
      stale_term_said_ = resp.master_term();
      spdlog::warn("nexec agent {}: a master of term {} answered, but the master of term {} leads; its answer is "
                   "not acted on",
                   options_.host, resp.master_term(), master_term_);
    }
    return;
  }
  last_accepted_heartbeat_ = absl::Now();
  if (metrics_) {
    metrics_->heartbeats_ok->Increment();
    metrics_->last_heartbeat->Set(absl::ToDoubleSeconds(last_accepted_heartbeat_ - absl::UnixEpoch()));
  }
  if (sent_as.empty()) {
    // The first answer: the master took none of the reports (of no store), and this agent
    // serves its store from now on.
    if (absl::Status serving = ServeMasterLocked(resp.master_identity()); !serving.ok()) {
      spdlog::error("nexec agent {}: {}", options_.host, std::string(serving.message()));
    }
    return;
  }
  // The exits taken leave the journal: a successor has nothing more to report of them.
  std::vector<std::string> taken;
  for (size_t i = 0; i < std::min(sent_exits, book_.exits().size()); ++i) {
    const pb::TaskReport& r = book_.exits()[i];
    taken.push_back(TaskKey(r.job_id(), r.task_index(), r.attempt()));
  }
  book_.Acknowledge(sent_exits, sent_notes);
  if (absl::Status s = journal_->Ended(taken); !s.ok()) {
    // A successor would report them again, which the master ignores (those attempts ended).
    spdlog::error("tasks {}: {}", absl::StrJoin(taken, ", "), std::string(s.message()));
  }
  for (const auto& n : resp.notify()) {
    if (absl::Status written = NotifyLocked(n); !written.ok()) {
      spdlog::warn("job {}: resize events not written: {}", n.job_id(), written.ToString());
    }
  }
  for (const auto& k : resp.kill()) {
    std::string key = TaskKey(k.job_id(), k.task_index(), k.attempt());
    mu_.Unlock();
    absl::Status killed = runner_.Kill(key);
    if (killed.ok()) spdlog::info("killed stale task {} at the master's word", key);
    // Between two phases: killed as its next one starts, or before (PhaseStarterLoop).
    if (absl::IsNotFound(killed)) runner_.KillWhenStarted(key);
    mu_.Lock();
  }
}

}  // namespace jc::nexec
