#include "adapters/example/local_backend.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "adapters/sdk/file_range.h"

extern char** environ;

namespace jc::adapter {
namespace fs = std::filesystem;
namespace {

std::string ReadSmallFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(s.str()));
}

// Alive and not a zombie.
bool Alive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::string stat = ReadSmallFile(absl::StrCat("/proc/", pid, "/stat"));
  auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

}  // namespace

LocalBackend::LocalBackend(std::string work_dir, int cpus, int memory_mb)
    : work_dir_(std::move(work_dir)), cpus_(cpus), memory_mb_(memory_mb) {}

std::string LocalBackend::Dir(const std::string& id) const { return (fs::path(work_dir_) / id).string(); }

absl::StatusOr<pb::CenterInfo> LocalBackend::Describe() {
  pb::CenterInfo info;
  info.set_scheduler("local");
  info.mutable_capacity()->set_cpu(cpus_);
  info.mutable_capacity()->set_memory(memory_mb_);
  return info;
}

absl::StatusOr<pb::Usage> LocalBackend::GetUsage() {
  std::lock_guard<std::mutex> lock(mu_);
  pb::Usage u;
  int running = static_cast<int>(running_.size());
  u.set_running_task_num(running);
  u.mutable_used()->set_cpu(std::min(running, cpus_));
  u.mutable_free()->set_cpu(std::max(0, cpus_ - running));
  u.mutable_free()->set_memory(memory_mb_);
  return u;
}

namespace {

// The account a replica runs as, when it is not the adapter's own: resolved here, switched
// to by setpriv in the wrapper (only root can).
struct SwitchTo {
  uid_t uid;
  gid_t gid;
};

absl::StatusOr<std::optional<SwitchTo>> AccountSwitch(const std::string& user) {
  if (user.empty()) return std::nullopt;
  passwd pw;
  passwd* out = nullptr;
  char buf[16384];
  if (getpwnam_r(user.c_str(), &pw, buf, sizeof buf, &out) != 0 || out == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no local account \"", user, "\" on the center's host"));
  }
  if (out->pw_uid == geteuid()) return std::nullopt;
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the local adapter does not run as root, so it cannot run replicas as ", user));
  }
  return SwitchTo{out->pw_uid, out->pw_gid};
}

}  // namespace

absl::StatusOr<std::string> LocalBackend::Submit(const ReplicaLaunch& launch) {
  auto switch_to = AccountSwitch(launch.user);
  if (!switch_to.ok()) return switch_to.status();
  // The replica's name is its id, and creating its directory claims it: a repeated submit
  // (after this adapter died anywhere between here and recording the replica) finds the
  // directory and starts nothing, so no replica runs twice.
  fs::path dir = Dir(launch.name);
  std::error_code ec;
  fs::create_directories(work_dir_, ec);
  if (!fs::create_directory(dir, ec)) {
    if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
    return launch.name;  // claimed before
  }
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec,
                  ec);  // whatever the umask: the adapter's alone to write
  // The replica's directory is the adapter's: its control files (pid, exit, stopped) and
  // output live there, where the replica cannot write, so it can neither plant a link that
  // makes the adapter (root) write or read for it, nor name a process for Stop to kill.
  // The command works in `work` inside it, which is the replica account's.
  const fs::path work = dir / "work";
  if (!fs::create_directory(work, ec)) {
    return absl::UnavailableError(absl::StrCat("cannot create ", work.string(), ": ", ec.message()));
  }
  // The output files are made here, readable by the adapter's account only; the wrapper
  // appends to them (opened by root in root's directory, then inherited by the command).
  for (const char* name : {"stdout", "stderr"}) {
    const int fd = open((dir / name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("cannot create ", (dir / name).string(), ": ", std::strerror(errno)));
    }
    close(fd);
  }
  // A wrapper shell runs the command and writes its exit code when it ends; it runs in
  // its own session so it outlives an adapter restart.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.push_back(*e);
  for (const auto& [k, v] : launch.env) env_strings.push_back(k + "=" + v);
  env_strings.push_back("JC_REPLICA_COMMAND=" + launch.command);
  env_strings.push_back("JC_CONTROL_DIR=" + dir.string());
  env_strings.push_back("JC_REPLICA_DIR=" + work.string());
  env_strings.push_back("JC_REPLICA_NAME=" + launch.name);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  // The wrapper records its own pid first, so a replica whose adapter died before writing
  // it below is still followed.
  // As another account, only the command is switched; `work` becomes the account's.
  std::string as;
  if (switch_to->has_value()) {
    const SwitchTo& to = **switch_to;
    if (chown(work.c_str(), to.uid, to.gid) != 0) {
      return absl::InternalError(absl::StrCat("cannot hand ", work.string(), " to ", launch.user));
    }
    as = absl::StrCat("/usr/bin/setpriv --reuid=", to.uid, " --regid=", to.gid, " --init-groups ");
  }
  std::string script =
      "cd \"$JC_CONTROL_DIR\" && echo $$ >pid.tmp && mv pid.tmp pid && "
      "(cd work && unset JC_CONTROL_DIR && exec " + as +
      "/bin/sh -c \"$JC_REPLICA_COMMAND\") >>stdout 2>>stderr </dev/null; "
      "echo $? >exit.tmp && times >times.tmp && mv times.tmp times && mv exit.tmp exit";
  std::string sh = "/bin/sh", dash_c = "-c";
  char* argv[] = {sh.data(), dash_c.data(), script.data(), nullptr};
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, sh.c_str(), nullptr, &attr, argv, envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return absl::ResourceExhaustedError(absl::StrCat("cannot start the replica: ", std::strerror(rc)));
  // Answered once the wrapper has recorded its pid, so that a stop right after the
  // submit finds the process (the wrapper writes it first thing: this is a few ms).
  for (int i = 0; i < 2000 && !fs::exists(dir / "pid"); ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;  // it ended already (cd failed)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Counted in the usage from now on: the control plane drops its reservation for a
  // replica once it sees usage measured after the submit was answered, so usage that
  // waited for the next poll to count it made the center look free (and it was
  // over-filled).
  std::lock_guard<std::mutex> lock(mu_);
  running_.insert(launch.name);
  return launch.name;
}

namespace {

std::optional<absl::Time> ModifiedAt(const fs::path& file) {
  struct stat st;
  if (stat(file.c_str(), &st) != 0) return std::nullopt;
  return absl::TimeFromTimespec(st.st_mtim);
}

// "0m1.250000s" as seconds.
double ShellSeconds(absl::string_view text) {
  size_t m = text.find('m');
  double minutes = 0, seconds = 0;
  if (m == absl::string_view::npos || !absl::SimpleAtod(text.substr(0, m), &minutes)) return 0;
  absl::string_view rest = absl::StripSuffix(text.substr(m + 1), "s");
  if (!absl::SimpleAtod(rest, &seconds)) return 0;
  return minutes * 60 + seconds;
}

// What an ended replica used: its start (the wrapper writes its pid first thing) and end
// (its exit code, or the stop), and the CPU time of the command's processes as the
// wrapper's shell counted them when they ended (`times`: user and system time of the
// children it waited for; a stopped replica's wrapper was killed with it and counted none).
void AddUsage(const fs::path& dir, ReplicaObservation* o) {
  std::optional<absl::Time> start = ModifiedAt(dir / "pid");
  std::optional<absl::Time> end = ModifiedAt(dir / "exit");
  if (!end) end = ModifiedAt(dir / "stopped");
  if (!start || !end) return;
  o->started_at = *start;
  o->ended_at = *end;
  pb::ReplicaUsage usage;
  usage.set_wall_seconds(std::max(0.0, absl::ToDoubleSeconds(*end - *start)));
  std::vector<std::string> lines = absl::StrSplit(ReadSmallFile(dir / "times"), '\n', absl::SkipEmpty());
  if (lines.size() >= 2) {
    std::vector<absl::string_view> children = absl::StrSplit(lines[1], ' ', absl::SkipEmpty());
    if (children.size() == 2) usage.set_cpu_seconds(ShellSeconds(children[0]) + ShellSeconds(children[1]));
  }
  o->usage = usage;
}

}  // namespace

absl::StatusOr<ExecPlan> LocalBackend::PlanExec(const ExecRequest& request) {
  const fs::path dir = Dir(request.external_id);
  if (Observe(request.external_id).state != pb::REPLICA_RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("replica ", request.external_id, " is not running here"));
  }
  auto switch_to = AccountSwitch(request.account);
  if (!switch_to.ok()) return switch_to.status();
  int pid = 0;
  absl::SimpleAtoi(ReadSmallFile(dir / "pid"), &pid);
  // The replica's environment: its wrapper's (the adapter's process, so readable), less
  // what only the wrapper uses.
  std::string environ_text = pid > 0 ? ReadSmallFile(fs::path("/proc") / std::to_string(pid) / "environ") : "";
  if (environ_text.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot read replica ", request.external_id, "'s environment"));
  }
  ExecPlan plan;
  for (absl::string_view e : absl::StrSplit(environ_text, '\0', absl::SkipEmpty())) {
    if (absl::StartsWith(e, "JC_CONTROL_DIR=") || absl::StartsWith(e, "JC_REPLICA_COMMAND=")) continue;
    plan.env.emplace_back(e);
  }
  plan.cwd = (dir / "work").string();
  if (switch_to->has_value()) {
    const SwitchTo& to = **switch_to;
    plan.argv = {"/usr/bin/setpriv", absl::StrCat("--reuid=", to.uid), absl::StrCat("--regid=", to.gid),
                 "--init-groups", "--"};
  }
  plan.argv.insert(plan.argv.end(), request.command.begin(), request.command.end());
  return plan;
}

ReplicaObservation LocalBackend::Observe(const std::string& id) {
  fs::path dir = Dir(id);
  ReplicaObservation o;
  std::error_code ec;
  int pid = 0;
  absl::SimpleAtoi(ReadSmallFile(dir / "pid"), &pid);
  if (pid > 0) waitpid(pid, nullptr, WNOHANG);  // reap it if it is our child
  // Alive first, the exit code second: the wrapper writes its exit code before it exits,
  // so a wrapper found gone has its code there. (The other order misses a replica that
  // ends between the two reads, and reported it lost.)
  bool alive = Alive(pid);
  std::string code = ReadSmallFile(dir / "exit");
  int exit_code = 0;
  if (!code.empty() && absl::SimpleAtoi(code, &exit_code)) {
    o.state = exit_code == 0 ? pb::REPLICA_SUCCEEDED : pb::REPLICA_FAILED;
    o.exit_code = exit_code;
    if (exit_code != 0) o.message = absl::StrCat("exited with ", exit_code);
  } else if (alive) {
    o.state = pb::REPLICA_RUNNING;
  } else if (pid <= 0 && fs::exists(dir) &&
             fs::file_time_type::clock::now() - fs::last_write_time(dir, ec) < std::chrono::seconds(10)) {
    o.state = pb::REPLICA_PENDING;  // claimed and starting: its wrapper has not written its pid yet
  } else if (fs::exists(dir / "stopped")) {
    o.state = pb::REPLICA_STOPPED;
    o.exit_code = 128 + SIGKILL;
    o.message = "stopped";
  } else {
    o.state = pb::REPLICA_FAILED;
    o.exit_code = -1;
    o.message = "the replica's process is gone without an exit code";
  }
  if (o.state == pb::REPLICA_RUNNING) o.started_at = ModifiedAt(dir / "pid");
  if (o.state == pb::REPLICA_SUCCEEDED || o.state == pb::REPLICA_FAILED || o.state == pb::REPLICA_STOPPED) {
    AddUsage(dir, &o);
  }
  return o;
}

absl::StatusOr<std::map<std::string, ReplicaObservation>> LocalBackend::Poll(
    const std::vector<std::string>& ids) {
  std::map<std::string, ReplicaObservation> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& id : ids) {
    if (!fs::exists(fs::path(Dir(id)))) continue;  // unknown here
    out[id] = Observe(id);
    // Starting (pending) counts as using its share, as it does from the submit on.
    if (out[id].state == pb::REPLICA_RUNNING || out[id].state == pb::REPLICA_PENDING) {
      running_.insert(id);
    } else {
      running_.erase(id);
    }
  }
  return out;
}

absl::Status LocalBackend::Stop(const std::string& id) {
  fs::path dir = Dir(id);
  int pid = 0;
  if (!absl::SimpleAtoi(ReadSmallFile(dir / "pid"), &pid) || pid <= 0) {
    return absl::NotFoundError(absl::StrCat("no local replica ", id));
  }
  std::ofstream(dir / "stopped") << "1\n";
  // The wrapper leads its own session and process group: the whole replica goes.
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(id);
  return absl::OkStatus();
}

absl::StatusOr<std::string> LocalBackend::ReadLog(const std::string& id, bool stderr, int64_t offset,
                                                  int64_t max_bytes) {
  // Not written yet: no output so far.
  return ReadFileRange((fs::path(Dir(id)) / (stderr ? "stderr" : "stdout")).string(), offset, max_bytes);
}

}  // namespace jc::adapter
