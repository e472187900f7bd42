#include "executor/agent/task_runner.h"

#include "common/oci/image_reference.h"
#include "executor/container/container_bundle.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "executor/agent/direct_exec.h"
#include "executor/agent/user_files.h"
#include "common/exec/close_descriptors.h"
#include "executor/agent/vfork_child.h"

namespace jc::nexec {
namespace {

// What the child reports through the CLOEXEC pipe when it cannot exec.
struct ChildError {
  int step = -1;  // index into kSteps; -1: none (the child exec'd)
  int err = 0;
};
enum Step { kSetpgid, kOpenStdout, kOpenStderr, kBecomeUser, kChdir, kExec, kAffinity, kSetsid, kControllingTty, kCgroup, kFiles,
            kCloneTree, kMountNamespace, kAttach };
constexpr const char* kSteps[] = {"setpgid", "open stdout", "open stderr", "become the user", "chdir", "exec",
                                  "sched_setaffinity", "setsid", "set the controlling terminal",
                                  "join the task's cgroup", "take its own descriptor table",
                                  "clone a directory of the user's (open_tree, Linux 5.2 or later)",
                                  "make the task's mount namespace", "attach a directory of the user's (move_mount)"};

// What the task's child process does between clone and exec, with everything it needs
// prepared by the agent beforehand (StartSharedMemoryChild: no allocation from here).
struct TaskChild {
  // Where a failing child says why: the agent's memory, which the child shares until it
  // execs (StartSharedMemoryChild), read once the agent's thread resumes.
  ChildError* error = nullptr;
  // Started sharing the agent's descriptor table: it takes a table of its own, of the
  // descriptors below this (the agent's long-lived ones are above), before it changes any.
  int share_below = 0;
  bool tty = false;
  int child_in = -1;  // stdin (and, for a terminal, stdout and stderr)
  const TaskCgroup* cgroup = nullptr;
  const Account* user = nullptr;  // set: become this account first
  int out_fd = -1, err_fd = -1;   // opened by the agent, or -1
  bool same_file = false;
  const char* out_path = nullptr;  // set: the child opens it, as the user
  const char* err_path = nullptr;
  char* out_dirs = nullptr;  // mkdir -p buffers of those paths
  char* err_dirs = nullptr;
  // Where it runs: the first of `cwds` it can enter, as its account. One that does not exist
  // or is no directory gives way to the next (a submission directory missing on this host
  // to the account's home, a missing home to /); one that exists but it may not enter sends
  // it to /tmp with that one's note on its stderr. Looked at by the child, as the account,
  // not by the agent: root's look would tell the account which paths it cannot reach exist
  // (its task ran in its home or in /tmp), and on a file system that does not answer would
  // hold the agent's launching thread itself, out of reach of the bounded wait for its child.
  static constexpr int kMaxCwds = 3;
  int cwd_count = 0;
  const char* cwds[kMaxCwds] = {};
  const std::string* cwd_notes[kMaxCwds] = {};
  // Direct exec: the environment's PWD entry, set to the PWD of the directory entered (the
  // shell sets its own).
  char** pwd_slot = nullptr;
  char* pwd_entries[kMaxCwds] = {};
  const cpu_set_t* cpus = nullptr;
  char** argv = nullptr;
  char** envp = nullptr;
  // Set when argv is a command's program itself (direct_exec.h): `program` is exec'd (argv[0]
  // is the command's word), and `shell_argv` with `shell_envp` if that fails (a program
  // removed since it was looked up, one the account may not run), so the shell says why,
  // as it would have; and if the task is moved to /tmp, whose PWD the shell sets itself.
  const char* program = nullptr;
  char** shell_argv = nullptr;
  char** shell_envp = nullptr;
  // In its image, with the agent root: a mount namespace of the task's own (the runner's,
  // runc's and, below it, the container's), where the directories the agent opened as the
  // user (`attach_fds`) are attached at `attach_targets` (in its bundle), for runc to bind
  // from there. `trees`: room for their clones.
  bool mount_namespace = false;
  size_t attach_count = 0;
  const int* attach_fds = nullptr;
  const char* const* attach_targets = nullptr;
  int* trees = nullptr;
};

[[noreturn]] void FailChild(const TaskChild& c, int step) {
  c.error->err = errno;
  c.error->step = step;
  _exit(127);
}

// The signals a task starts with at their default whatever the agent does with them (see
// RunTaskChild).
constexpr int kTaskDefaultSignals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1,
                                       SIGUSR2, SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU, SIGXCPU, SIGXFSZ};

// An output file opened for appending without waiting: a FIFO no one reads would hold the
// open, and with it the thread that starts every account's tasks (this child shares the
// agent's memory and holds its launching thread until it execs; attacker helper-81), so
// one is refused (ENXIO) and one with a reader taken; then the file is made blocking, as a
// task's output is. -1 with errno.
int OpenOutputWithoutWaiting(const char* path, char* walk) {
  // Never on a FUSE file system an account mounted: a file there another account made the
  // output's path (a shared directory) would hold this child in the close below until it
  // is given up, and count it against this task's account (attacker helper-86).
  const int fd = OpenUnlessOnFuseOfAnAccount(path, walk, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_NOCTTY, 0600);
  if (fd < 0) return -1;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

int RunTaskChild(void* arg) {
  const TaskChild& c = *static_cast<const TaskChild*>(arg);
  // Unblock every signal (the agent's threads block some; StartSharedMemoryChild all).
  // Each signal at its default, as slurmstepd starts a task: not what the agent ignores (it
  // ignores SIGPIPE, and one started by a background shell or nohup ignores SIGINT, SIGQUIT
  // or SIGHUP too, which a task would inherit through exec; attacker helper-81). The caught
  // ones are reset already (CLONE_CLEAR_SIGHAND, or DefaultCaughtSignals). Before the mask
  // opens, so none arrives ignored.
  for (int sig : kTaskDefaultSignals) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Its own session (and process group), as slurmstepd's tasks: never the agent's, whose
  // controlling terminal (an agent started from a root shell, tmux, screen) a task could
  // otherwise open as /dev/tty and type into with TIOCSTI (attacker helper-97: a root shell
  // ran a job's injected command).
  if (setsid() < 0) FailChild(c, kSetsid);
  if (c.tty) {
    // The terminal as its controlling one: ^C typed at the submitter's terminal reaches the
    // task's foreground processes as SIGINT.
    if (ioctl(c.child_in, TIOCSCTTY, 0) != 0) FailChild(c, kControllingTty);
  }
  if (c.cgroup && c.cgroup->JoinFromChild() != 0) FailChild(c, kCgroup);
  if (c.share_below > 0 && UnshareLowDescriptors(c.share_below) != 0) FailChild(c, kFiles);
  if (c.mount_namespace) {
    // Clones of the user's directories, taken in the agent's namespace (a directory's mount
    // binds only in its own), attached in the task's: the agent's namespace is left as it is.
    for (size_t i = 0; i < c.attach_count; ++i) {
      c.trees[i] = static_cast<int>(syscall(SYS_open_tree, c.attach_fds[i], "",
                                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
      if (c.trees[i] < 0) FailChild(c, kCloneTree);
    }
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
      FailChild(c, kMountNamespace);
    }
    for (size_t i = 0; i < c.attach_count; ++i) {
      if (syscall(SYS_move_mount, c.trees[i], "", AT_FDCWD, c.attach_targets[i], MOVE_MOUNT_F_EMPTY_PATH) != 0) {
        FailChild(c, kAttach);
      }
      close(c.trees[i]);
    }
  }
  // From here on it walks the account's paths, where the kernel may hold it for good (given
  // up, vfork_child.h): it keeps only what it hands the task, not the agent's sockets.
  const int handed[] = {c.child_in, c.out_fd, c.err_fd};
  CloseDescriptorsBut(handed, 3);
  // The user first, then its files: every open below is checked as the user's own. Its
  // real and saved uid stay root until just before exec (FinishBecomingAccount), so the
  // account cannot stop this child meanwhile: it holds the agent's launching thread
  // (attacker helper-81). A stop in the moment left, or ^Z on its terminal, the launching thread
  // answers (StartSharedMemoryChild).
  if (c.user && ActAsAccount(*c.user) != 0) FailChild(c, kBecomeUser);
  if (c.tty) {
    dup2(c.child_in, 0);
    dup2(c.child_in, 1);
    dup2(c.child_in, 2);
  } else {
    int out = c.out_fd;
    if (c.out_path) {
      if (MakeParentDirectories(c.out_dirs) != 0) FailChild(c, kOpenStdout);
      if ((out = OpenOutputWithoutWaiting(c.out_path, c.out_dirs)) < 0) FailChild(c, kOpenStdout);
    } else if (out < 0) {
      out = open("/dev/null", O_WRONLY);
    }
    int err = c.same_file ? out : c.err_fd;
    if (c.err_path) {
      if (MakeParentDirectories(c.err_dirs) != 0) FailChild(c, kOpenStderr);
      if ((err = OpenOutputWithoutWaiting(c.err_path, c.err_dirs)) < 0) FailChild(c, kOpenStderr);
    } else if (err < 0) {
      err = open("/dev/null", O_WRONLY);
    }
    int in = c.child_in >= 0 ? c.child_in : open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
  }
  // The task holds its input and output, nothing else: whatever the agent inherited
  // without close-on-exec (from whoever started it) stays out of every task, as slurmstepd
  // and sbatch leave none either. A kernel without close_range leaves close-on-exec to exec.
  (void)syscall(SYS_close_range, 3U, ~0U, 0U);
  int entered = -1, refused = c.cwd_count - 1;
  for (int i = 0; i < c.cwd_count; ++i) {
    if (chdir(c.cwds[i]) == 0) {
      entered = i;
      break;
    }
    if (errno != ENOENT && errno != ENOTDIR) {
      refused = i;
      break;
    }
  }
  const bool moved = entered < 0;
  if (moved) {
    if (chdir("/tmp") != 0) FailChild(c, kChdir);
    // Without waiting: its stderr may be a FIFO whose reader keeps it full, and this child
    // holds the thread that starts every account's tasks (attacker helper-82). A note
    // that does not fit is dropped.
    const int flags = fcntl(2, F_GETFL);
    if (flags >= 0 && fcntl(2, F_SETFL, flags | O_NONBLOCK) == 0) {
      (void)!write(2, c.cwd_notes[refused]->data(), c.cwd_notes[refused]->size());
      (void)fcntl(2, F_SETFL, flags);
    }
  } else if (c.pwd_slot != nullptr) {
    *c.pwd_slot = c.pwd_entries[entered];
  }
  if (c.user && FinishBecomingAccount(*c.user) != 0) FailChild(c, kBecomeUser);
  if (c.cpus && sched_setaffinity(0, sizeof(*c.cpus), c.cpus) != 0) FailChild(c, kAffinity);
  if (moved && c.shell_argv) {
    execve(c.shell_argv[0], c.shell_argv, c.shell_envp);
    FailChild(c, kExec);
  }
  execve(c.program ? c.program : c.argv[0], c.argv, c.envp);
  if (c.shell_argv) execve(c.shell_argv[0], c.shell_argv, c.shell_envp);
  FailChild(c, kExec);
}

// "4 GiB", "512 MiB": a limit as a user gave it.
std::string HumanBytes(int64_t bytes) {
  if (bytes > 0 && bytes % (int64_t{1} << 30) == 0) return absl::StrCat(bytes >> 30, " GiB");
  if (bytes > 0 && bytes % (int64_t{1} << 20) == 0) return absl::StrCat(bytes >> 20, " MiB");
  return absl::StrCat(bytes, " bytes");
}

}  // namespace

TaskRunner::TaskRunner() { signal(SIGPIPE, SIG_IGN); }

TaskRunner::~TaskRunner() {
  // Containers no cgroup holds first: runc started them out of its group (reviewer
  // helper-99: the agent's exit left them running).
  std::vector<std::string> in_images;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& key : image_tasks_) {
      if (cgroups_.count(key) == 0) in_images.push_back(key);
    }
  }
  for (const std::string& key : in_images) {
    std::lock_guard<std::mutex> one_at_a_time(signal_mu_);
    SignalContainer(key, SIGKILL);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, pid] : tasks_) {
    if (pid <= 0) continue;
    kill(-pid, SIGKILL);
    if (auto cg = cgroups_.find(key); cg != cgroups_.end()) (void)cg->second->KillAll();
    ReapOrAbandon(pid);  // a task in an uninterruptible wait does not hold the agent's exit
    if (auto cg = cgroups_.find(key); cg != cgroups_.end()) (void)cg->second->Remove();
  }
  for (auto& [key, input] : inputs_) CloseInputNow(input);
  // The agent's own directory of task cgroups goes with it (empty by now).
  for (auto& cg : idle_cgroups_) (void)cg->Remove();
  if (cgroups_layout_) {
    for (const auto& [controller, dir] : cgroups_layout_->dirs) rmdir(dir.c_str());
  }
}

void TaskRunner::CloseInputNow(Input& input, std::chrono::steady_clock::time_point give_up) {
  if (input.copier) {
    // Joined when it ends by `give_up` (it drains what the task wrote last), else given up:
    // a write to a file system that does not answer must not hold the heartbeat loop, which
    // closes an ended task's input (attacker helper-83). It holds its own descriptors.
    CopierState& state = *input.copier_state;
    state.stop.store(true);
    std::unique_lock<std::mutex> lock(state.mu);
    if (state.ended_cv.wait_until(lock, give_up, [&] { return state.ended; })) {
      lock.unlock();
      input.copier->join();
    } else {
      lock.unlock();
      spdlog::warn("a terminal's output copier is stuck writing its output file; left to end on its own");
      input.copier->detach();
    }
    input.copier.reset();
    input.copier_state.reset();
  }
  if (input.fd >= 0) close(input.fd);
  if (input.out_fd >= 0) close(input.out_fd);
  input.fd = input.out_fd = -1;
}

void TaskRunner::CopyTerminal(int master_fd, int out_fd, std::shared_ptr<CopierState> state) {
  const std::atomic<bool>& stop = state->stop;
  auto copy = [&] {
    char buf[16384];
    while (true) {
      pollfd p{master_fd, POLLIN, 0};
      int ready = poll(&p, 1, 100);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        if (stop.load()) return;  // the task ended and nothing more came
        continue;
      }
      ssize_t n = read(master_fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // EIO: every process closed the terminal. Wait for the end rather than spin.
        while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return;
      }
      for (ssize_t done = 0; done < n;) {
        ssize_t w = write(out_fd, buf + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) {
          // A FIFO or terminal nobody drains: waited on until the task ends, then dropped.
          if (stop.load()) return;
          pollfd out{out_fd, POLLOUT, 0};
          poll(&out, 1, 100);
          continue;
        }
        if (w <= 0) break;  // the output file went away: the terminal still drains
        done += w;
      }
    }
  };
  copy();
  close(master_fd);
  close(out_fd);
  std::lock_guard<std::mutex> lock(state->mu);
  state->ended = true;
  state->ended_cv.notify_all();
}

absl::StatusOr<size_t> TaskRunner::WriteInput(const std::string& key, const std::string& data,
                                              absl::Duration wait) {
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = inputs_.find(key);
    if (it == inputs_.end() || it->second.fd < 0) {
      return absl::FailedPreconditionError(absl::StrCat("task ", key, " takes no input"));
    }
    // A duplicate, so the write can wait without holding the lock and a close meanwhile
    // cannot hand the number to another file.
    fd = dup(it->second.fd);
    if (fd < 0) return absl::InternalError(absl::StrCat("dup: ", std::strerror(errno)));
  }
  const absl::Time deadline = absl::Now() + wait;
  size_t done = 0;
  absl::Status error = absl::OkStatus();
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (left <= 0) break;
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, left);
      continue;
    }
    error = absl::FailedPreconditionError(
        absl::StrCat("task ", key, " closed its input (", std::strerror(errno), ")"));
    break;
  }
  close(fd);
  if (done == 0 && !error.ok()) return error;
  return done;
}

absl::Status TaskRunner::CloseInput(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = inputs_.find(key);
  if (it == inputs_.end() || it->second.fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("task ", key, " takes no input"));
  }
  if (it->second.tty) {
    // A terminal has no end of input; ^D is what a reading program takes for one.
    const char eot = 4;
    (void)!write(it->second.fd, &eot, 1);
    return absl::OkStatus();
  }
  close(it->second.fd);
  it->second.fd = -1;
  return absl::OkStatus();
}

absl::Status TaskRunner::SetTerminalSize(const std::string& key, int rows, int cols) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = inputs_.find(key);
  if (it == inputs_.end() || !it->second.tty || it->second.fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("task ", key, " has no terminal"));
  }
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(rows);
  ws.ws_col = static_cast<unsigned short>(cols);
  if (ioctl(it->second.fd, TIOCSWINSZ, &ws) != 0) {
    return absl::InternalError(absl::StrCat("TIOCSWINSZ: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<pid_t> TaskRunner::Launch(const TaskLaunch& t) {
  {
    // The key is reserved (pid 0) before the fork so two launches of one task cannot
    // both start it.
    std::lock_guard<std::mutex> lock(mu_);
    if (!tasks_.emplace(t.key, 0).second) {
      return absl::AlreadyExistsError(absl::StrCat("task ", t.key, " runs"));
    }
  }
  absl::StatusOr<pid_t> started = Start(t);
  if (!started.ok() && !t.image.empty() && images_) {
    // Its bundle holds its command and environment: it goes with the start that failed.
    std::error_code ignored;
    std::filesystem::remove_all(BundleDir(t.key), ignored);
  }
  bool kill_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started.ok()) {
      tasks_[t.key] = *started;
      if (!t.image.empty()) image_tasks_.insert(t.key);
    } else {
      tasks_.erase(t.key);
    }
    kill_now = kill_when_started_.erase(t.key) > 0 && started.ok();
  }
  // Killed while it was starting: now that it has processes, they go.
  if (kill_now) {
    if (absl::Status killed = Kill(t.key); !killed.ok()) {
      // Its processes outlived the rounds of SIGKILL: the next Reaps go on killing them
      // (draining cgroups), and its exit is reported as any task's.
      spdlog::error("task {}: killed as it started, but: {}", t.key, killed.ToString());
    }
  }
  return started;
}

namespace {

// Starts the child `child` describes and waits until it has exec'd: its pid, or Aborted
// with the step that failed in `failed` (the child writes it there, in the memory it shares
// with this thread until it execs or exits, which is when this thread resumes).
absl::StatusOr<pid_t> SpawnChild(TaskChild& child, ChildError* failed, uid_t account) {
  *failed = ChildError{};
  child.error = failed;
  // The agent's table is shared, not copied, when every descriptor the child uses after
  // taking its own is in the low range. The child's own table then ends at the highest of
  // those: kernels before 6.11 size a table copied by close_range(n, ~0U,
  // CLOSE_RANGE_UNSHARE) for n slots (later ones for the last open descriptor below n), and
  // the child's close of 3 and up walks every slot, so n = HighDescriptorBase() (half the
  // open files limit) would cost there, per task, a 4 MiB table and a walk of half a
  // million slots at a limit of 1,048,576.
  const int base = HighDescriptorBase();
  int highest_attach = -1;
  for (size_t i = 0; i < child.attach_count; ++i) highest_attach = std::max(highest_attach, child.attach_fds[i]);
  const bool share = base > 0 && child.out_fd < base && child.err_fd < base && child.child_in < base &&
                     highest_attach < base;
  child.share_below = share ? std::max({child.out_fd, child.err_fd, child.child_in, highest_attach, 2}) + 1 : 0;
  PreExecKill killed = PreExecKill::kNone;
  pid_t pid = StartSharedMemoryChild(RunTaskChild, &child, share, &killed, account);
  if (pid < 0) return absl::ResourceExhaustedError(absl::StrCat("clone: ", std::strerror(errno)));
  if (killed != PreExecKill::kNone) {
    // It held the thread that starts every account's tasks (attacker helper-81). The job
    // cannot start (FailedPrecondition: not a refusal by the agent, which would requeue it).
    // It and its group were killed, and it is reaped or given up (StartSharedMemoryChild).
    if (killed == PreExecKill::kStopped) {
      return absl::FailedPreconditionError("the task's process was stopped (SIGSTOP, or ^Z on its terminal) before it could "
                                "start its command, and was killed: a stopped start holds every task's start");
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the task's process did not start its command within ", PreExecLimit().count(),
        " ms (--task_start_timeout; its working directory or output on a file system that does not answer?) and "
        "was killed"));
  }
  // Its own session and group were made by the child before exec, and so before this call
  // returned: a signal to the group finds it.
  if (failed->step >= 0) {
    ReapOrAbandon(pid, account);  // its exit may close a file on a file system that never answers
    return absl::AbortedError("the task's child failed before exec");
  }
  return pid;
}

}  // namespace

// The task's environment: a login's basics, the submission environment as --env chose,
// who runs it, and nexec's own (NEXEC_*, CUDA_VISIBLE_DEVICES, the host list and a hostfile
// written as the user).

absl::StatusOr<std::map<std::string, std::string>> TaskRunner::TaskEnvironment(const TaskLaunch& t,
                                                                               const Account& user) {
  // The submission environment (as --env chose; a copy of the tree, no look-ups), a PATH
  // and SHELL where it has none, then who runs it and nexec's own on top.
  std::map<std::string, std::string> env = t.env;
  env.try_emplace("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  env.try_emplace("SHELL", user.shell);
  env["HOME"] = user.home;
  env["USER"] = user.name;
  env["LOGNAME"] = user.name;
  env["NEXEC_JOBID"] = t.job_id;
  env["NEXEC_TASK_KEY"] = t.key;
  // GPUs by index; an empty list hides every GPU rather than exposing them all.
  env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(t.gpus, ",");
  if (!t.cpus.empty()) env["NEXEC_CPUS"] = absl::StrJoin(t.cpus, ",");
  if (!t.hosts.empty()) {
    env["NEXEC_HOSTS"] = absl::StrJoin(t.hosts, " ");
    env["LSB_HOSTS"] = env["NEXEC_HOSTS"];  // what LSF-aware MPI launchers read
    if (!t.hostfile_path.empty()) {
      // One line per host with its slot count, as MPI hostfiles are written; the file is
      // the user's, so it is opened as the user (a link there must not make root write).
      std::string text;
      std::vector<std::pair<std::string, int>> counts;
      for (const auto& h : t.hosts) {
        if (counts.empty() || counts.back().first != h) counts.push_back({h, 0});
        ++counts.back().second;
      }
      for (const auto& [h, n] : counts) absl::StrAppend(&text, h, " slots=", n, "\n");
      auto hostfile = OpenRegularTaskFile(user, t.hostfile_path, O_WRONLY | O_CREAT | O_TRUNC, 0600, t.output_root);
      if (!hostfile.ok()) return absl::InvalidArgumentError(absl::StrCat("hostfile: ", hostfile.status().message()));
      if (write(hostfile->get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
        return absl::InvalidArgumentError(absl::StrCat("cannot write hostfile ", t.hostfile_path, ": ", std::strerror(errno)));
      }
      env["NEXEC_HOSTFILE"] = t.hostfile_path;
    }
  }
  return env;
}

// A task in its image: its bundle (config.json for runc) written, and the runner's command
// line and environment (nexec-image-run pulls the image by digest and starts runc).
absl::Status TaskRunner::PrepareImage(const TaskLaunch& t, const Account& user,
                                      std::map<std::string, std::string>& env, ImageLaunch* out) {
  std::error_code ec;
  if (!images_) return absl::FailedPreconditionError(absl::StrCat("this agent runs no images (", no_images_, ")"));
  // Interactive tasks: runc relays its stdin (a pipe) to the container, or, on a
  // terminal (-Ip), gives the container a terminal of its own relayed to the task's.
  auto ref = oci::ImageReference::Parse(t.image);
  if (!ref.ok()) return ref.status();
  if (ref->digest.empty()) return absl::InvalidArgumentError(absl::StrCat("image ", t.image, " is not named by digest"));
  const std::string bundle = BundleDir(t.key);
  std::filesystem::remove_all(bundle, ec);
  std::filesystem::create_directories(bundle, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot make the task's bundle ", bundle, ": ", ec.message()));
  ContainerSpec spec;
  spec.rootfs = absl::StrCat(images_->store, "/", ref->digest.substr(7), "/rootfs");
  env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";  // the image's, not the host's
  if (!t.gpus.empty()) {
    // Inside, only the held GPUs' nodes exist and CUDA numbers them from 0: name them by
    // UUID where known (unambiguous either way), else by their numbers inside.
    std::vector<std::string> visible = t.gpu_uuids;
    if (visible.size() != t.gpus.size()) {
      visible.clear();
      for (size_t i = 0; i < t.gpus.size(); ++i) visible.push_back(absl::StrCat(i));
    }
    env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(visible, ",");
    env["NEXEC_HOST_GPUS"] = absl::StrJoin(t.gpus, ",");  // their indices on the host
  }
  auto gpu_edits = images_->gpus.For(t.gpus);
  if (!gpu_edits.ok()) return gpu_edits.status();
  for (const auto& [k, v] : env) spec.env.push_back(k + "=" + v);
  ApplyEnv(gpu_edits->env, &spec.env);
  spec.gpu = std::move(*gpu_edits);
  if (!images_->nexec_run.empty()) {
    // The job's command starts its other hosts' tasks with nexec-run, as bare jobs do:
    // the host's binary on the host's libraries, and munge's socket to sign with.
    spec.mounts.push_back({images_->host_lib_dir, "/tmp/.jc/lib", {"rbind", "ro", "nosuid", "nodev"}});
    spec.mounts.push_back({images_->nexec_run, "/tmp/.jc/nexec-run.bin", {"bind", "ro", "nosuid", "nodev"}});
    spec.mounts.push_back({images_->nexec_run_wrapper, "/tmp/.jc/bin/nexec-run", {"bind", "ro", "nosuid", "nodev"}});
    // munged's, as the agent knows it: never a path from the task's environment.
    const std::string munge = images_->munge_socket.empty() ? "/run/munge/munge.socket.2" : images_->munge_socket;
    const std::string munge_dir = std::filesystem::path(munge).parent_path().string();
    if (std::filesystem::is_directory(munge_dir, ec)) spec.mounts.push_back({munge_dir, munge_dir, {"rbind", "nosuid", "nodev"}});
    ApplyEnv({"PATH=/tmp/.jc/bin"}, &spec.env);
  }
  // What the user names (its working directory, datasets) is opened as the user and
  // attached by the task's child in a mount namespace of the task's own below the bundle,
  // where runc binds it from: runc resolves bind sources as root, so no path the user
  // controls ever reaches it (issue 44). A directory the user cannot enter, a link swapped
  // in meanwhile, or the store itself never reaches the container. (An agent that is not
  // root runs its own account's tasks only: it binds their paths, looked at as root's are,
  // through the bounded helper: a look in this thread at a directory below its account's own
  // file system that never answers held every launch; reviewer helper-96.)
  const bool attach = geteuid() == 0;
  auto open_dir = [&](const std::string& dir) -> absl::StatusOr<OwnedFd> {
    JC_ASSIGN_OR_RETURN(OwnedFd fd, OpenDirectoryAs(user, dir));
    if (!attach) return OwnedFd();
    return fd;
  };
  auto bound = [&](OwnedFd fd, const std::string& dir) -> absl::StatusOr<std::string> {
    if (!attach) return dir;
    const std::string target = absl::StrCat(bundle, "/mnt/", out->attach_targets.size());
    std::filesystem::create_directories(target, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot make ", target, ": ", ec.message()));
    out->attach_fds.push_back(fd.get());
    out->attach_dirs.push_back(std::move(fd));
    out->attach_targets.push_back(target);
    return target;
  };
  for (const auto& dir : t.read_only_dirs) {
    auto opened = open_dir(dir);
    if (!opened.ok()) return absl::InvalidArgumentError(absl::StrCat("read-only directory: ", opened.status().message()));
    JC_ASSIGN_OR_RETURN(std::string source, bound(std::move(*opened), dir));
    spec.mounts.push_back({source, dir, {"rbind", "ro", "nosuid", "nodev"}});
  }
  // The working directory: the submission's, else the user's home, else / ; one that
  // exists but the user cannot enter makes the task run in the container's /tmp, with a
  // line on its stderr, as bare tasks do.
  std::string dir = t.cwd.empty() ? user.home : t.cwd;
  auto opened = open_dir(dir);
  if (!opened.ok() && absl::IsNotFound(opened.status()) && dir != user.home) {
    dir = user.home;
    opened = open_dir(dir);
  }
  if (opened.ok() && dir != "/") {
    spec.cwd = dir;
    JC_ASSIGN_OR_RETURN(spec.cwd_source, bound(std::move(*opened), dir));
  } else if (opened.ok() || absl::IsNotFound(opened.status())) {
    spec.cwd = "/";
  } else {
    spec.cwd = "/tmp";
    spec.cwd_in_container = true;
    out->note = absl::StrCat("nexec: ", user.name, " cannot enter ", dir, "; running in /tmp (",
                             opened.status().message(), ")");
  }
  spec.command = t.command;
  spec.user = user;
  spec.cgroup = absl::StrCat("nexec-", getpid(), "-", t.key);
  spec.terminal = t.tty;
  // An agent that is not root runs runc as its account: rootless (ImageRunning::userns_helper).
  spec.rootless = !images_->userns_helper.empty();
  spec.userns_helper = images_->userns_helper;
  std::ofstream config(bundle + "/config.json");
  config << ContainerConfig(spec).dump();
  if (!config.good()) return absl::InternalError(absl::StrCat("cannot write ", bundle, "/config.json"));
  config.close();
  out->args = {images_->runner, images_->store, ref->ToString(), bundle, spec.cgroup};
  for (auto& a : out->args) out->argv.push_back(a.data());
  out->argv.push_back(nullptr);
  out->env_strings = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  if (spec.rootless) {
    // runc, skopeo and umoci as the account keep their state and read their settings in
    // its store, as the Slurm adapter's runner does, never in a home another job may use.
    for (const char* name : {"HOME=", "XDG_RUNTIME_DIR="}) out->env_strings.push_back(name + images_->store);
    out->env_strings.push_back("XDG_CONFIG_HOME=" + images_->store + "/.config");
  }
  if (!images_->auth_file.empty()) out->env_strings.push_back("NEXEC_REGISTRY_AUTH_FILE=" + images_->auth_file);
  if (!images_->cert_dir.empty()) out->env_strings.push_back("NEXEC_REGISTRY_CERT_DIR=" + images_->cert_dir);
  if (images_->store_limit_mb > 0) {
    out->env_strings.push_back(absl::StrCat("NEXEC_IMAGE_STORE_LIMIT_MB=", images_->store_limit_mb));
  }
  out->env_strings.push_back(absl::StrCat("NEXEC_IMAGE_PULL_TIMEOUT_S=", images_->pull_timeout_s));
  out->env_strings.push_back(absl::StrCat("NEXEC_IMAGE_UNPACK_UID=", images_->unpack_uid));
  if (!out->note.empty()) out->env_strings.push_back("NEXEC_TASK_NOTE=" + out->note);
  for (auto& s : out->env_strings) out->envp.push_back(s.data());
  out->envp.push_back(nullptr);
  out->attach_paths.clear();
  for (auto& target : out->attach_targets) out->attach_paths.push_back(target.data());
  return absl::OkStatus();
}

// An emptied cgroup of an ended task, reset to this one's limits, or a new one.
absl::StatusOr<std::shared_ptr<TaskCgroup>> TaskRunner::TakeCgroup(const TaskLaunch& t, bool in_image) {
  std::shared_ptr<TaskCgroup> cgroup;
  CgroupLimits limits;
  limits.memory_bytes = t.memory_limit_mb * 1024 * 1024;
  limits.pids = t.pids_limit;
  limits.cpus = t.cpus;  // a cpuset too: the task cannot widen its affinity past them
  // A task in its image is confined to its GPUs by the container's own device rules
  // (runc: deny all, then its nodes). Under v1 the task's cgroup must then deny nothing:
  // a v1 child may not allow what its parent denies, and runc's defaults allow every
  // mknod ("c *:* m"), so its container would fail to start on a host with GPUs the task
  // does not hold. Under v2 both filters run, the task's and the container's.
  if (!in_image || cgroups_layout_->v2) limits.denied_devices = t.denied_devices;
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_cgroups_.empty()) {
      cgroup = std::move(idle_cgroups_.back());
      idle_cgroups_.pop_back();
    } else {
      name = absl::StrCat("t", cgroups_made_++);
    }
  }
  if (cgroup) {
    if (absl::Status reset = cgroup->Reset(limits); !reset.ok()) {
      return absl::UnavailableError(absl::StrCat("the task's cgroup: ", reset.message()));
    }
    return cgroup;
  }
  auto made = TaskCgroup::Create(*cgroups_layout_, name, limits);
  if (!made.ok()) return absl::UnavailableError(absl::StrCat("the task's cgroup: ", made.status().message()));
  return std::shared_ptr<TaskCgroup>(std::move(*made));
}

// An interactive task's input: a pipe, or a pseudo-terminal whose output the agent copies
// to the task's stdout file (opened as the user). Nothing for other tasks.
absl::Status TaskRunner::OpenInput(const TaskLaunch& t, const Account& user, bool switch_user,
                                   const std::string& out_path, Input* input, int* child_in) {
  if (t.tty) {
    int master = -1, slave = -1;
    winsize ws{};
    ws.ws_row = static_cast<unsigned short>(t.tty_rows > 0 ? t.tty_rows : 24);
    ws.ws_col = static_cast<unsigned short>(t.tty_cols > 0 ? t.tty_cols : 80);
    if (openpty(&master, &slave, nullptr, nullptr, &ws) != 0) {
      return absl::ResourceExhaustedError(absl::StrCat("openpty: ", std::strerror(errno)));
    }
    fcntl(master, F_SETFD, FD_CLOEXEC);
    fcntl(slave, F_SETFD, FD_CLOEXEC);
    fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
    if (switch_user) (void)fchown(slave, user.uid, user.gid);
    // The terminal's output is copied to the stdout file by the agent, through a
    // descriptor opened as the user.
    // Non-blocking for good: only the copier writes it, and never waits on it for ever.
    auto out = OpenTaskFile(user, out_path, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_NOCTTY, 0600, t.output_root);
    if (!out.ok()) {
      close(master);
      close(slave);
      return absl::InvalidArgumentError(absl::StrCat("output file: ", out.status().message()));
    }
    input->fd = master;
    input->tty = true;
    input->out_fd = out->release();
    *child_in = slave;
  } else if (t.stdin_pipe) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
    fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    input->fd = fds[1];
    *child_in = fds[0];
  }
  return absl::OkStatus();
}

// The task's output files. They are the user's: opened as the user by the child (`child_opens`)
// once it became the user, or by a non-root agent's child, which is the user already; here
// when the task runs in its image (its child stays root to exec runc), or the file lies in
// the master's output directory (which no user can write; OpenTaskFile) — never by root by a
// path the user controls, so a task writes nowhere its user could not and a link planted for
// it leads root nowhere. Never in this thread by a path the account controls, even the
// agent's own account's: a file system of the account's that never answers would hold the
// thread that starts every task; the child's start is bounded (--task_start_timeout).
// New files are 0600: a job's output is its user's.
absl::Status TaskRunner::OpenOutputs(const TaskLaunch& t, const Account& user, bool child_opens,
                                     TaskOutputs* out) {
  out->out_path = t.stdout_path.empty() ? "/dev/null" : t.stdout_path;
  out->err_path = t.stderr_path.empty() ? out->out_path : t.stderr_path;
  out->same_file = out->err_path == out->out_path;
  out->out_dirs = out->out_path;  // the child's mkdir -p buffers, made before the fork
  out->err_dirs = out->err_path;
  auto open_here = [&](const std::string& path, OwnedFd* file) -> absl::Status {
    // The master's output directory is root's for a root agent (no account can plant or mount
    // anything there: opened here), a non-root agent's own account's (as any of its paths).
    if (path == "/dev/null" || (child_opens && (geteuid() != 0 || !InTrustedDirectory(path, t.output_root)))) {
      return absl::OkStatus();
    }
    // Without waiting, as the child opens them: a FIFO no one reads is refused rather than
    // hold this thread, which starts every account's tasks.
    auto opened = OpenTaskFileWithoutWaiting(user, path, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY, 0600, t.output_root);
    if (!opened.ok()) return absl::InvalidArgumentError(absl::StrCat("output file: ", opened.status().message()));
    *file = std::move(*opened);
    return absl::OkStatus();
  };
  JC_RETURN_IF_ERROR(open_here(out->out_path, &out->out_file));
  if (!out->same_file) JC_RETURN_IF_ERROR(open_here(out->err_path, &out->err_file));
  return absl::OkStatus();
}

// What a child that failed before exec reported, as the task's error: an output file it
// could not open as the user as the user's shell would put it (the job ends with it as
// its reason), any other step by name.
absl::Status TaskRunner::ChildFailure(int step, int err, const std::string& key, const std::string& user,
                                      const TaskOutputs& outputs) {
  if (step == kOpenStdout || step == kOpenStderr) {
    return absl::InvalidArgumentError(absl::StrCat("output file: cannot open ",
                                                   step == kOpenStdout ? outputs.out_path : outputs.err_path, " as ",
                                                   user, ": ", OpenErrorText(err)));
  }
  return absl::FailedPreconditionError(absl::StrCat("cannot start task ", key, ": ", kSteps[step], ": ", std::strerror(err)));
}

absl::StatusOr<Account> TaskRunner::TaskAccount(const std::string& name) {
  auto user = accounts_.Lookup(name);
  if (!user.ok()) return user.status();
  JC_RETURN_IF_ERROR(CheckMayActFor(*user));
  return user;
}

namespace {

// `strings` as the NULL-ended array exec takes (pointing into them).
std::vector<char*> ExecArray(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

absl::StatusOr<pid_t> TaskRunner::Start(const TaskLaunch& t) {
  if (t.command.empty()) return absl::InvalidArgumentError("empty command");
  auto user = TaskAccount(t.user);
  if (!user.ok()) return user.status();
  const bool switch_user = ActsForOthers(*user);
  JC_RETURN_IF_ERROR(CheckNoStuckStarts(*user));
  // In its image, the child (root, until runc) starts in /: the container's directory is
  // the one PrepareImage opened as the user.
  const bool in_image = !t.image.empty();
  std::vector<std::string> cwds;  // TaskChild::cwds
  if (in_image) {
    cwds = {"/"};
  } else {
    if (!t.cwd.empty()) cwds.push_back(t.cwd);
    cwds.push_back(user->home);
    cwds.push_back("/");
  }
  std::vector<std::string> cwd_notes, pwd_strings;
  for (const std::string& dir : cwds) {
    cwd_notes.push_back(absl::StrCat("nexec: ", user->name, " cannot enter ", dir, "; running in /tmp\n"));
    pwd_strings.push_back("PWD=" + dir);
  }

  // Everything the child needs is prepared before fork: after fork in a threaded
  // process only async-signal-safe calls are allowed.
  auto environment = TaskEnvironment(t, *user);
  if (!environment.ok()) return environment.status();
  std::map<std::string, std::string> env = std::move(*environment);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp = ExecArray(env_strings);
  std::vector<std::string> shell_words{"/bin/sh", "-c", t.command};
  std::vector<char*> shell_argv = ExecArray(shell_words);
  char** argv = shell_argv.data();
  // A command without shell syntax runs as its program: no shell's exec and start per task.
  // Only with an environment the shell would pass on whole (it drops names it cannot hold),
  // and with PWD as the shell sets it: the program sees what it saw under the shell.
  std::optional<DirectCommand> direct;
  if (direct_exec_ && !in_image &&
      std::all_of(env.begin(), env.end(), [](const auto& kv) { return ShellName(kv.first); })) {
    direct = programs_.DirectArgv(t.command, env["PATH"]);
  }
  std::vector<std::string> direct_env_strings;
  std::vector<char*> direct_argv, direct_envp;
  if (direct) {
    direct_argv = ExecArray(direct->argv);
    argv = direct_argv.data();
    for (const auto& [k, v] : env) {
      if (k != "PWD") direct_env_strings.push_back(k + "=" + v);
    }
    direct_env_strings.push_back(pwd_strings.front());
    direct_envp = ExecArray(direct_env_strings);
  }
  // In its image: the child stays root to exec the runner, which pulls the image and
  // starts runc; the container becomes the user (container_bundle.h).
  ImageLaunch image;
  if (in_image) {
    JC_RETURN_IF_ERROR(PrepareImage(t, *user, env, &image));
    argv = image.argv.data();
    envp.swap(image.envp);
  }
  TaskOutputs outputs;
  // The child opens them as the user: a root agent's once it became the user, a non-root
  // agent's (the user already) as well, so that the account's own file system that never
  // answers holds a start bounded by --task_start_timeout, not this thread (helper-93).
  JC_RETURN_IF_ERROR(OpenOutputs(t, *user, (switch_user || geteuid() != 0) && !in_image, &outputs));
  const std::string& out_path = outputs.out_path;
  const std::string& err_path = outputs.err_path;
  const int out_fd = outputs.out_fd();
  const int err_fd = outputs.err_fd();

  // CPU binding (B6): the task's processes may run on these cores only; set in the child
  // before exec, so nothing it starts escapes it.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : t.cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  }
  // Its cgroup, made before the fork; the child joins it before anything else, so
  // nothing it starts is ever outside it.
  std::shared_ptr<TaskCgroup> cgroup;
  if (cgroups_layout_) {
    JC_ASSIGN_OR_RETURN(cgroup, TakeCgroup(t, in_image));
  }
  if (cgroup && in_image) cgroup->set_nested();  // runc makes the container's cgroup below it
  auto drop_cgroup = absl::MakeCleanup([&] {
    if (!cgroup) return;
    std::lock_guard<std::mutex> lock(mu_);
    // Idle again once the reaper finds it empty: a child killed before exec may still be in
    // it (an uninterruptible wait: ReapOrAbandon).
    draining_cgroups_.push_back(cgroup);
  });
  // Interactive input: a pipe, or a pseudo-terminal; the agent keeps the writing side.
  Input input;
  int child_in = -1;  // the child's stdin (and, for a terminal, stdout and stderr)
  JC_RETURN_IF_ERROR(OpenInput(t, *user, switch_user, out_path, &input, &child_in));
  auto drop_input = [&] {
    if (child_in >= 0) close(child_in);
    CloseInputNow(input);
  };

  const bool tty = t.tty;
  TaskChild child;
  child.tty = tty;
  child.child_in = child_in;
  child.cgroup = cgroup.get();
  child.user = switch_user && !in_image ? &*user : nullptr;
  child.out_fd = out_fd;
  child.err_fd = err_fd;
  child.same_file = outputs.same_file;
  child.out_path = outputs.child_opens_out() ? out_path.c_str() : nullptr;
  child.err_path = outputs.child_opens_err() ? err_path.c_str() : nullptr;
  child.out_dirs = outputs.out_dirs.data();
  child.err_dirs = outputs.err_dirs.data();
  child.cwd_count = static_cast<int>(cwds.size());
  for (size_t i = 0; i < cwds.size(); ++i) {
    child.cwds[i] = cwds[i].c_str();
    child.cwd_notes[i] = &cwd_notes[i];
    child.pwd_entries[i] = pwd_strings[i].data();
  }
  child.cpus = t.cpus.empty() ? nullptr : &cpus;
  child.argv = argv;
  child.envp = envp.data();
  if (direct) {
    child.program = direct->program.c_str();
    child.envp = direct_envp.data();
    child.pwd_slot = &direct_envp[direct_env_strings.size() - 1];  // its PWD, pushed last
    child.shell_argv = shell_argv.data();
    child.shell_envp = envp.data();
  }
  std::vector<int> trees(image.attach_fds.size(), -1);
  if (in_image && geteuid() == 0) {
    child.mount_namespace = true;
    child.attach_count = image.attach_fds.size();
    child.attach_fds = image.attach_fds.data();
    child.attach_targets = image.attach_paths.data();
    child.trees = trees.data();
  }
  ChildError failed{};
  auto pid = SpawnChild(child, &failed, user->uid);
  if (child_in >= 0) close(child_in);
  child_in = -1;
  if (!pid.ok()) {
    drop_input();
    return absl::IsAborted(pid.status()) ? ChildFailure(failed.step, failed.err, t.key, user->name, outputs) : pid.status();
  }
  if (cgroup) {
    std::move(drop_cgroup).Cancel();  // it is the task's now, until it is reaped
    std::lock_guard<std::mutex> lock(mu_);
    cgroups_[t.key] = cgroup;
  }
  if (input.fd >= 0) KeepInput(t.key, std::move(input));
  return *pid;
}

absl::StatusOr<exec_stream::CommandPlan> TaskRunner::PlanExec(const TaskLaunch& t,
                                                              const std::vector<std::string>& command, bool tty) {
  std::shared_ptr<TaskCgroup> cgroup;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tasks_.find(t.key);
    if (it == tasks_.end() || it->second == 0) {
      return absl::FailedPreconditionError(absl::StrCat("task ", t.key, " does not run here (yet)"));
    }
    if (auto c = cgroups_.find(t.key); c != cgroups_.end()) cgroup = c->second;
  }
  exec_stream::CommandPlan plan;
  // Bounded as a task's start is, and a child killed then that stays in the kernel counts
  // against the task's account as a task's does (attacker helper-91: one stuck `nexec exec`
  // held a server thread, and the agent's stop, for ever). runc's too (reviewer helper-92).
  plan.start_limit = PreExecLimit();
  const absl::StatusOr<Account> owner = TaskAccount(t.user);
  plan.reap_stuck = [uid = owner.ok() ? owner->uid : kNoAccount](pid_t pid) { ReapOrAbandon(pid, uid); };
  if (!t.image.empty()) {
    // runc exec: the new process takes the container's own process settings (its account,
    // environment, directory, capabilities, no_new_privileges) and its cgroup.
    if (!images_) return absl::FailedPreconditionError("this agent runs no images");
    const std::string root = images_->store + "/.runc";
    const std::string id = absl::StrCat("nexec-", getpid(), "-", t.key);  // as PrepareImage names it
    std::error_code ec;
    if (!std::filesystem::exists(absl::StrCat(root, "/", id, "/state.json"), ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", t.key, "'s container is not up yet (its image may still be pulled); ask again"));
    }
    plan.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
    plan.cwd = "/";
    if (!images_->userns_helper.empty()) {
      // Rootless (an agent that is not root): through nexec-userns-exec --enter, as the
      // Slurm adapter's exec (RootlessExecArgv).
      plan.env.push_back("HOME=" + images_->store);
      plan.env.push_back("XDG_RUNTIME_DIR=" + images_->store);
      plan.argv = RootlessExecArgv(root, id, images_->userns_helper, "nexec: the task's container is not running",
                                   command);
      return plan;
    }
    plan.argv = {"runc", "--root", root, "exec"};
    if (tty) {
      plan.argv.insert(plan.argv.end(), {"--tty", "--env", "TERM=xterm"});
    }
    // runc takes what follows the container's id as the command, flags and all.
    plan.argv.push_back(id);
    plan.argv.insert(plan.argv.end(), command.begin(), command.end());
    return plan;
  }
  JC_ASSIGN_OR_RETURN(Account user, TaskAccount(t.user));
  JC_RETURN_IF_ERROR(CheckNoStuckStarts(user));
  TaskLaunch without_hostfile = t;  // written at the task's start; not again
  without_hostfile.hostfile_path.clear();
  JC_ASSIGN_OR_RETURN(auto env, TaskEnvironment(without_hostfile, user));
  if (!t.hostfile_path.empty() && env.count("NEXEC_HOSTS") > 0) env["NEXEC_HOSTFILE"] = t.hostfile_path;
  for (const auto& [k, v] : env) plan.env.push_back(k + "=" + v);
  plan.argv = command;
  // Entered as the account, never looked at as root first (a stat as root would tell the
  // account whether a directory it may not search exists: an attacker helper's finding):
  // the task's directory, else its home, else /tmp (where a task runs whose account could
  // not enter its own).
  plan.cwd = t.cwd.empty() ? user.home : t.cwd;
  plan.cwd_fallbacks = {user.home, "/tmp"};
  if (ActsForOthers(user)) plan.identity = exec_stream::CommandPlan::Identity{user.uid, user.gid, user.groups};
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : t.cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  }
  const bool bind = !t.cpus.empty();
  if (cgroup || bind) {
    plan.in_child = [cgroup, cpus, bind]() -> int {
      if (cgroup && cgroup->JoinFromChild() != 0) return -1;
      if (bind && sched_setaffinity(0, sizeof cpus, &cpus) != 0) return -1;
      return 0;
    };
  }
  return plan;
}

void TaskRunner::KeepInput(const std::string& key, Input input) {
  if (input.tty) {
    input.copier_state = std::make_shared<CopierState>();
    // Its own duplicates: it may outlive the Input (CloseInputNow).
    const int master = fcntl(input.fd, F_DUPFD_CLOEXEC, 0);
    const int out = fcntl(input.out_fd, F_DUPFD_CLOEXEC, 0);
    if (master >= 0 && out >= 0) {
      input.copier = std::make_unique<std::thread>(CopyTerminal, master, out, input.copier_state);
    } else {
      spdlog::error("task {}: no copier for its terminal's output: {}", key, std::strerror(errno));
      if (master >= 0) close(master);
      if (out >= 0) close(out);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  inputs_[key] = std::move(input);
}


namespace {

// The process groups led by children of runc (`runc`, stopped): the container's first
// process, which runc starts in a session of its own, and any other child of runc's that
// leads its group (rootful containers share the host's PID namespace, and runc, a
// subreaper, adopts what the container's processes orphan).
std::vector<pid_t> ContainerGroups(pid_t runc) {
  std::vector<pid_t> groups;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return groups;
  const std::string parent = std::to_string(runc);
  while (dirent* d = readdir(dir)) {
    int pid = 0;
    if (!absl::SimpleAtoi(d->d_name, &pid) || pid == runc) continue;
    std::vector<std::string> f = ProcStatFields(pid);  // state, parent, group, ...
    if (f.size() >= 3 && f[1] == parent && f[2] == d->d_name) groups.push_back(pid);
  }
  closedir(dir);
  return groups;
}

bool Stopped(pid_t pid) {
  std::vector<std::string> f = ProcStatFields(pid);
  return !f.empty() && (f[0] == "T" || f[0] == "t");
}

// Whether every thread of `pid` is stopped: runc is a Go program, and whichever of its
// threads runs the goroutine that reaps may be the last to stop (reviewer helper-99: its main
// thread showed stopped while others ran, in a quarter of rounds).
bool AllThreadsStopped(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(dir.c_str());
  if (tasks == nullptr) return false;
  bool all = true, any = false;
  while (dirent* d = readdir(tasks)) {
    if (d->d_name[0] == '.') continue;
    const std::string path = dir + "/" + d->d_name + "/stat";
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // a thread that ended meanwhile
    char buf[1024];
    const ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n <= 0) continue;
    any = true;
    const absl::string_view stat(buf, static_cast<size_t>(n));
    const size_t end = stat.rfind(')');  // the command name may hold spaces
    const char state = end != absl::string_view::npos && end + 2 < stat.size() ? stat[end + 2] : '?';
    if (state != 'T' && state != 't') {
      all = false;
      break;
    }
  }
  closedir(tasks);
  return all && any;
}

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
bool PidfdSignal(int pidfd, int sig) { return syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0; }

}  // namespace

void TaskRunner::SignalContainer(const std::string& key, int sig) {
  pid_t runc = 0;
  OwnedFd pidfd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tasks_.find(key);
    if (it == tasks_.end() || it->second <= 0 || image_tasks_.count(key) == 0 || cgroups_.count(key) > 0) return;
    runc = it->second;
    pidfd = OwnedFd(PidfdOpen(runc));  // runc, the agent's child, is not reaped while the lock is held
  }
  if (!pidfd) {
    spdlog::warn("task {}: cannot signal its container ({}): {}", key, runc, std::strerror(errno));
    return;
  }
  // Whatever runc was (a suspended task's is stopped already), it is again afterwards.
  const bool was_stopped = Stopped(runc);
  if (!PidfdSignal(pidfd.get(), SIGSTOP)) return;  // it has ended: its container with it, or orphaned
  // It stops at once unless a system call holds it (only root could hold root's runc so): a
  // few callers hold the agent's lock, so the wait is short.
  bool stopped = false;
  for (int i = 0; i < 200 && !stopped; ++i) {
    // Read, then asked whether it is still runc (not reaped, so what was read is its own).
    const std::vector<std::string> f = ProcStatFields(runc);
    if (!PidfdSignal(pidfd.get(), 0) || f.empty() || f[0] == "Z" || f[0] == "X") return;  // it ended meanwhile
    stopped = (f[0] == "T" || f[0] == "t") && AllThreadsStopped(runc) && PidfdSignal(pidfd.get(), 0);
    if (!stopped) std::this_thread::sleep_for(std::chrono::microseconds(1000));
  }
  if (stopped) {
    // Its children cannot be reaped now: each pid named is still that child's (a zombie at
    // worst), and only root, or the agent's account, could continue runc meanwhile.
    for (pid_t group : ContainerGroups(runc)) kill(-group, sig);
  } else {
    spdlog::warn("task {}: its runc ({}) did not stop within 200 ms; its container's groups were not sent signal {}",
                 key, runc, sig);
  }
  if (!was_stopped && sig != SIGSTOP) PidfdSignal(pidfd.get(), SIGCONT);
}

absl::Status TaskRunner::SignalGroup(const std::string& key, int sig) {
  std::lock_guard<std::mutex> one_at_a_time(signal_mu_);
  // Signals runc passes on (it forwards what it catches to the container's first process)
  // are left to it, as before; these three it cannot.
  if (sig == SIGKILL || sig == SIGSTOP || sig == SIGCONT) SignalContainer(key, sig);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(key);
  if (it == tasks_.end() || it->second <= 0) {
    return absl::NotFoundError(absl::StrCat("no running task ", key));
  }
  if (kill(-it->second, sig) != 0 && errno != ESRCH) {
    return absl::InternalError(absl::StrCat("kill: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

// Whether every process of group `pgid` is stopped (state T) or gone.
// A shell that vforked a command waits for it in the kernel (state D, in kernel_clone or
// wait_for_vfork_done) until the command execs: when the command was stopped first, the
// shell cannot run either, so it is as stopped as the rest of the group.
bool WaitsOnVforkChild(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/wchan");
  std::string wchan;
  std::getline(in, wchan);
  return wchan == "kernel_clone" || absl::StrContains(wchan, "vfork");
}

bool GroupStopped(pid_t pgid) {
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return true;
  bool stopped = true;
  while (dirent* d = readdir(dir)) {
    int pid = 0;
    if (!absl::SimpleAtoi(d->d_name, &pid)) continue;
    std::vector<std::string> f = ProcStatFields(pid);
    // Field 5 is the process group; field 3 the state (Z: exited, not reaped yet).
    if (f.size() < 3 || f[2] != std::to_string(pgid)) continue;
    if (f[0] != "T" && f[0] != "t" && f[0] != "Z" && f[0] != "X" && !(f[0] == "D" && WaitsOnVforkChild(pid))) {
      stopped = false;
      break;
    }
  }
  closedir(dir);
  return stopped;
}

}  // namespace

absl::Status TaskRunner::SignalCgroup(const std::string& key, int sig) {
  std::shared_ptr<TaskCgroup> cgroup;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cgroups_.find(key);
    if (it == cgroups_.end()) return absl::NotFoundError(absl::StrCat("task ", key, " has no cgroup"));
    cgroup = it->second;
  }
  // Frozen while its processes are listed and signalled, so none it forks meanwhile is
  // missed; a stop or kill sent to a frozen process takes effect as it thaws.
  JC_RETURN_IF_ERROR(cgroup->Freeze());
  for (pid_t pid : cgroup->Processes()) kill(pid, sig);
  return cgroup->Thaw();
}

absl::Status TaskRunner::Suspend(const std::string& key) {
  // In a cgroup: every process of the task, wherever it went (setsid, a double fork).
  if (absl::Status s = SignalCgroup(key, SIGSTOP); !absl::IsNotFound(s)) return s;
  // A process the task forks while the group is being signalled can miss the SIGSTOP and
  // run on (seen under load): the group is signalled until all of it has stopped, for a
  // bounded while.
  for (int attempt = 0; attempt < 50; ++attempt) {
    JC_RETURN_IF_ERROR(SignalGroup(key, SIGSTOP));
    pid_t pgid = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = tasks_.find(key);
      if (it == tasks_.end()) return absl::OkStatus();
      pgid = it->second;
    }
    if (GroupStopped(pgid)) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return absl::OkStatus();  // what still runs is stopped by the signals already sent, or soon exits
}
absl::Status TaskRunner::Resume(const std::string& key) {
  if (absl::Status s = SignalCgroup(key, SIGCONT); !absl::IsNotFound(s)) return s;
  return SignalGroup(key, SIGCONT);
}

void TaskRunner::KillWhenStarted(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (kill_when_started_.size() > 10000) kill_when_started_.clear();  // bounded: see the header
  kill_when_started_.insert(key);
}

bool TaskRunner::TakeKillWhenStarted(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return kill_when_started_.erase(key) > 0;
}

absl::Status TaskRunner::Kill(const std::string& key) {
  std::shared_ptr<TaskCgroup> cgroup;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = tasks_.find(key); it != tasks_.end() && it->second <= 0) {
      // Still starting (a stop right after the dispatch): it is killed as soon as it has a
      // process, instead of the kill failing with "no running task" and the task running on.
      kill_when_started_.insert(key);
      return absl::OkStatus();
    }
    if (auto it = cgroups_.find(key); it != cgroups_.end()) cgroup = it->second;
  }
  if (cgroup) {
    // No process of the task survives, whatever group or session it made for itself.
    auto killed = cgroup->KillAll();
    return killed.ok() ? absl::OkStatus() : killed.status();
  }
  // A stopped group must be continued for SIGKILL's exit to be reported promptly by
  // some shells; SIGKILL itself needs no help, but the order costs nothing.
  absl::Status s = SignalGroup(key, SIGKILL);
  if (s.ok()) SignalGroup(key, SIGCONT).IgnoreError();
  return s;
}

namespace {

// Held by nothing but the runner's own lists. Every copy of a task's cgroup is taken under
// the runner's lock from cgroups_, and this is asked under it once the task is no longer
// there: one owner now means none can appear.
bool Unshared(const std::shared_ptr<TaskCgroup>& cgroup) { return cgroup.use_count() == 1; }

}  // namespace

std::vector<TaskExit> TaskRunner::Reap() {
  std::vector<TaskExit> out;
  std::vector<Input> ended_inputs;  // closed after the lock: a terminal's copier drains first
  absl::Cleanup close_inputs = [&] {
    // Every copier told to stop first, then each waited for until one deadline: N stuck
    // copiers hold the heartbeat loop a second, not N (reviewer, session 81).
    for (Input& input : ended_inputs) {
      if (input.copier_state) input.copier_state->stop.store(true);
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (Input& input : ended_inputs) CloseInputNow(input, give_up);
  };
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = draining_cgroups_.begin(); it != draining_cgroups_.end();) {
    if (Unshared(*it) && (*it)->KillAll(/*attempts=*/1).ok()) {
      idle_cgroups_.push_back(std::move(*it));
      it = draining_cgroups_.erase(it);
    } else {
      ++it;
    }
  }
  // The tasks that ended: found among the agent's zombie children, one waitid per exit,
  // rather than a waitpid per running task each round. A zombie that is not a task's (a
  // sensor's, left to its owner) or a task not yet recorded sends this round to the scan.
  std::map<pid_t, int> ended;  // pid -> wait status
  bool scan = false;
  while (true) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) break;
    const bool ours = std::any_of(tasks_.begin(), tasks_.end(), [&](const auto& t) { return t.second == info.si_pid; });
    if (!ours && ReapIfAbandoned(info.si_pid)) continue;  // a child given up before exec, ended now
    int status = 0;
    if (!ours || waitpid(info.si_pid, &status, WNOHANG) != info.si_pid) {
      scan = true;
      break;
    }
    ended[info.si_pid] = status;
  }
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (it->second <= 0) {  // still starting
      ++it;
      continue;
    }
    int status = 0;
    pid_t r = 0;
    if (auto e = ended.find(it->second); e != ended.end()) {
      r = it->second;
      status = e->second;
    } else if (scan) {
      r = waitpid(it->second, &status, WNOHANG);
    }
    if (r == it->second) {
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      // The leader is gone; whatever it left in its group goes too, so a task's
      // processes never outlive it (in a cgroup: wherever they went).
      kill(-it->second, SIGKILL);
      TaskExit exit{it->first, code, ""};
      if (image_tasks_.erase(it->first) > 0) {
        // A task in an image whose pull failed says why (nexec-image-run); its bundle goes.
        const std::string bundle = BundleDir(it->first);
        if (code == 125) {
          std::ifstream failed(bundle + "/failed");
          std::getline(failed, exit.killed_because);
        }
        std::error_code ignored;
        std::filesystem::remove_all(bundle, ignored);
      }
      if (auto cg = cgroups_.find(it->first); cg != cgroups_.end()) {
        const CgroupUsage usage = cg->second->FinalUsage();
        TaskUsage last;
        last.cpu_seconds = usage.cpu_seconds;
        last.read_bytes = usage.read_bytes;
        last.write_bytes = usage.write_bytes;
        last.memory_peak_kb = usage.memory_peak_bytes / 1024;
        last.rss_kb = usage.memory_bytes / 1024;
        exit.usage = last;
        if (usage.oom_killed) {
          exit.killed_because = absl::StrCat("memory limit ", HumanBytes(cg->second->memory_limit_bytes()),
                                             " exceeded (OOM)");
        }
        // What is left of the task goes too, wherever it went; emptied, the cgroup serves
        // the next task (looked at again on the next Reaps until it is). Not while a kill,
        // a signal or a usage read of this task still holds it: a kill emptying it would go
        // on to kill the next task put in it.
        // (Found empty by the usage read just now, most tasks: nothing can have joined it
        // since, and there is nothing to kill.)
        if (Unshared(cg->second) && (usage.processes == 0 || cg->second->KillAll(/*attempts=*/1).ok())) {
          idle_cgroups_.push_back(cg->second);
        } else {
          draining_cgroups_.push_back(cg->second);
        }
        cgroups_.erase(cg);
      }
      out.push_back(std::move(exit));
      if (auto in = inputs_.find(it->first); in != inputs_.end()) {
        ended_inputs.push_back(std::move(in->second));
        inputs_.erase(in);
      }
      it = tasks_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<pid_t> TaskRunner::Pid(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(key);
  if (it == tasks_.end() || it->second <= 0) return std::nullopt;
  return it->second;
}

std::vector<std::string> TaskRunner::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  for (const auto& [k, pid] : tasks_) keys.push_back(k);
  return keys;
}

absl::StatusOr<TaskUsage> TaskRunner::Usage(const std::string& key) const {
  auto pid = Pid(key);
  if (!pid) return absl::NotFoundError(absl::StrCat("no running task ", key));
  return SampleProcessGroup(*pid);
}

std::map<std::string, TaskUsage> TaskRunner::UsageAll() const {
  std::map<pid_t, std::string> keys;  // tasks without a cgroup, by process group
  std::map<std::string, std::shared_ptr<TaskCgroup>> contained;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, pid] : tasks_) {
      if (pid <= 0) continue;
      if (auto cg = cgroups_.find(key); cg != cgroups_.end()) {
        contained[key] = cg->second;
      } else {
        keys[pid] = key;
      }
    }
  }
  std::map<std::string, TaskUsage> out;
  // A contained task's usage is its cgroup's: every process it started, those that left
  // its process group included, read from a few files instead of a walk over /proc.
  for (const auto& [key, cg] : contained) {
    const CgroupUsage c = cg->Usage();
    TaskUsage& u = out[key];
    u.cpu_seconds = c.cpu_seconds;
    u.rss_kb = c.memory_bytes / 1024;
    u.swap_kb = c.swap_bytes / 1024;
    u.threads = c.threads;
    u.read_bytes = c.read_bytes;
    u.write_bytes = c.write_bytes;
    u.processes = c.processes;
    u.memory_peak_kb = c.memory_peak_bytes / 1024;
  }
  if (keys.empty()) return out;
  std::set<pid_t> groups;
  for (const auto& [pid, key] : keys) groups.insert(pid);
  for (auto& [pgid, usage] : SampleProcessGroups(groups)) out[keys[pgid]] = usage;
  return out;
}

TaskUsage SampleProcessGroup(pid_t pgid) {
  auto all = SampleProcessGroups({pgid});
  return all[pgid];
}

std::vector<std::string> ProcStatFields(pid_t pid) {
  std::string path = absl::StrCat("/proc/", pid, "/stat");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return {};
  absl::string_view stat(buf, static_cast<size_t>(n));
  // The command name is in parentheses and may hold spaces: fields start after the last ')'.
  auto close_paren = stat.rfind(')');
  if (close_paren == absl::string_view::npos || close_paren + 2 > stat.size()) return {};
  return absl::StrSplit(absl::StripTrailingAsciiWhitespace(stat.substr(close_paren + 2)), ' ');
}

std::map<pid_t, TaskUsage> SampleProcessGroups(const std::set<pid_t>& pgids) {
  std::map<pid_t, TaskUsage> result;
  if (pgids.empty()) return result;
  static const long ticks = sysconf(_SC_CLK_TCK);
  static const long page_kb = sysconf(_SC_PAGESIZE) / 1024;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return result;
  while (dirent* d = readdir(dir)) {
    int pid = 0;
    if (!absl::SimpleAtoi(d->d_name, &pid)) continue;
    std::vector<std::string> f = ProcStatFields(pid);
    // f[0] is field 3 (state); pgrp is field 5, utime 14, stime 15, threads 20, rss 24.
    if (f.size() < 22) continue;
    int pgrp = 0;
    if (!absl::SimpleAtoi(f[2], &pgrp) || !pgids.count(pgrp)) continue;
    TaskUsage& u = result[pgrp];
    int64_t utime = 0, stime = 0, threads = 0, rss = 0;
    (void)absl::SimpleAtoi(f[11], &utime);
    (void)absl::SimpleAtoi(f[12], &stime);
    (void)absl::SimpleAtoi(f[17], &threads);
    (void)absl::SimpleAtoi(f[21], &rss);
    u.cpu_seconds += static_cast<double>(utime + stime) / ticks;
    u.threads += static_cast<int>(threads);
    u.rss_kb += rss * page_kb;
    ++u.processes;
    std::ifstream status_file(absl::StrCat("/proc/", pid, "/status"));
    for (std::string line; std::getline(status_file, line);) {
      if (line.rfind("VmSwap:", 0) == 0) {
        int64_t kb = 0;
        std::istringstream(line.substr(7)) >> kb;
        u.swap_kb += kb;
      }
    }
    std::ifstream io_file(absl::StrCat("/proc/", pid, "/io"));
    for (std::string line; std::getline(io_file, line);) {
      int64_t v = 0;
      if (line.rfind("read_bytes:", 0) == 0 && absl::SimpleAtoi(line.substr(12), &v)) {
        u.read_bytes += v;
      } else if (line.rfind("write_bytes:", 0) == 0 && absl::SimpleAtoi(line.substr(13), &v)) {
        u.write_bytes += v;
      }
    }
  }
  closedir(dir);
  return result;
}

}  // namespace jc::nexec
