#include "common/exec/attached_command.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/exec/close_descriptors.h"
#include "common/exec/exec_stream.h"

namespace jc::exec_stream {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Where argv[0] may be, in the order the PATH of `env` says: tried by the child, after it
// took the command's account (a directory of the PATH only that account may search is
// searched as it, never with this process's privileges).
std::vector<std::string> Candidates(const std::string& program, const std::vector<std::string>& env) {
  if (absl::StrContains(program, '/')) return {program};
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& e : env) {
    if (absl::StartsWith(e, "PATH=")) path = e.substr(5);
  }
  std::vector<std::string> out;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) out.push_back(absl::StrCat(dir, "/", program));
  return out;
}

// Writes `data` to the non-blocking `fd`, waiting for room; false once it cannot (the
// command closed its input) or `give_up` says so (checked every 250 ms).
bool WriteAll(int fd, absl::string_view data, const std::function<bool()>& give_up) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (give_up()) return false;
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 250);
      continue;
    }
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void SetSize(int fd, int rows, int cols) {
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(rows > 0 ? rows : 24);
  ws.ws_col = static_cast<unsigned short>(cols > 0 ? cols : 80);
  ::ioctl(fd, TIOCSWINSZ, &ws);
}

// Children killed at their start_limit that a thread of this file still waits for.
std::atomic<int> stuck_starts{0};
std::atomic<int> max_stuck_starts{kMaxStuckStarts};

int ExitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 255;
}

}  // namespace

int StuckStarts() { return stuck_starts.load(); }
void SetMaxStuckStarts(int most) { max_stuck_starts.store(most); }

absl::StatusOr<AttachedCommand> StartAttached(const CommandPlan& plan, bool tty, int rows, int cols) {
  if (const int stuck = stuck_starts.load(); stuck >= max_stuck_starts.load()) {
    return absl::UnavailableError(absl::StrCat(stuck, " commands killed before they started still wait in the kernel (a ",
                                               "file system that does not answer?); no more start until they end"));
  }
  // Input written to a command that closed its stdin is EPIPE, never the signal that would
  // end the daemon (an attacker helper's finding: `yes | jcctl job exec -i JOB -- head -n
  // 1` took the center's adapter down). Commands get the default back.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { ::signal(SIGPIPE, SIG_IGN); });
  if (plan.argv.empty() || plan.argv[0].empty()) return absl::FailedPreconditionError("no program to run");
  std::vector<std::string> candidates = Candidates(plan.argv[0], plan.env);
  std::vector<const char*> paths;
  for (const auto& c : candidates) paths.push_back(c.c_str());
  if (paths.empty()) return absl::FailedPreconditionError("the command's PATH is empty");
  const CommandPlan::Identity* identity = plan.identity ? &*plan.identity : nullptr;
  const std::function<int()>* in_child = plan.in_child ? &plan.in_child : nullptr;
  std::vector<char*> argv, envp;
  std::vector<std::string> args = plan.argv, env = plan.env;
  // A terminal without a TERM leaves full-screen programs guessing (as docker and kubectl
  // do, it is an xterm unless the replica says otherwise).
  if (tty && std::none_of(env.begin(), env.end(), [](const std::string& e) { return absl::StartsWith(e, "TERM="); })) {
    env.push_back("TERM=xterm");
  }
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  // The child's ends, and the adapter's.
  int child_in = -1, child_out = -1, child_err = -1;
  AttachedCommand out;
  out.tty = tty;
  auto fail = [&](const std::string& what) {
    int saved = errno;
    for (int* fd : {&child_in, &child_out, &child_err, &out.input, &out.output, &out.errors}) {
      if (*fd >= 0 && (fd != &child_out || child_out != child_in) && (fd != &child_err || child_err != child_in) &&
          (fd != &out.output || out.output != out.input)) {
        ::close(*fd);
      }
      *fd = -1;
    }
    return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(saved)));
  };
  if (tty) {
    int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0) return fail("no pseudo-terminal for the command");
    out.input = out.output = master;
    char name[128];
    if (::grantpt(master) != 0 || ::unlockpt(master) != 0 || ::ptsname_r(master, name, sizeof name) != 0) {
      return fail("no pseudo-terminal for the command");
    }
    int slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) return fail("cannot open the command's terminal");
    child_in = child_out = child_err = slave;
    // The terminal is its account's alone (programs that open it again by its name, `tty`'s,
    // must be able to); grantpt made it this process's, its group's writable.
    if (plan.identity && (::fchown(slave, plan.identity->uid, static_cast<gid_t>(-1)) != 0 || ::fchmod(slave, 0600) != 0)) {
      return fail("cannot give the command its terminal");
    }
    SetSize(master, rows, cols);
  } else {
    int in[2], outp[2], errp[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return fail("no pipe for the command");
    child_in = in[0];
    out.input = in[1];
    if (::pipe2(outp, O_CLOEXEC) != 0) return fail("no pipe for the command");
    out.output = outp[0];
    child_out = outp[1];
    if (::pipe2(errp, O_CLOEXEC) != 0) return fail("no pipe for the command");
    out.errors = errp[0];
    child_err = errp[1];
  }
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return fail("no pipe for the command");
  const char* cwd = plan.cwd.empty() ? "/" : plan.cwd.c_str();
  std::vector<const char*> fallbacks;
  for (const auto& dir : plan.cwd_fallbacks) fallbacks.push_back(dir.c_str());
  pid_t pid = ::fork();
  if (pid == 0) {
    // The child: only calls that are safe after fork in a threaded process.
    ::setsid();
    if (tty) ::ioctl(child_in, TIOCSCTTY, 0);
    ::dup2(child_in, 0);
    ::dup2(child_out, 1);
    ::dup2(child_err, 2);
    // Nothing else of the adapter's reaches the command (its sockets, its files).
    if (::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
      long max = ::sysconf(_SC_OPEN_MAX);
      for (int fd = 3; fd < (max > 0 && max < (1 << 20) ? max : (1 << 20)); ++fd) {
        if (fd != report[1]) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    // Stages a failure is reported at: 0 the cgroup, 1 the account, 2 the directory, 3 exec.
    // Past the cgroup's join (its files are the daemon's descriptors), every descriptor but
    // the report's is closed, not only marked: entering the directory can hold this child
    // for good, on a file system that never answers, and a child held so kept the listening
    // socket of the daemon that started it (nexec's restarted agent could not bind its port:
    // attacker helper-91).
    int stage = 0;
    int err = 0;
    const int handed[] = {0, 1, 2, report[1]};  // the command's input and output, and the report
    if (in_child != nullptr && (*in_child)() != 0) {
      err = errno;
    } else if (stage = 1; (CloseDescriptorsBut(handed, 4), identity != nullptr) &&
               // The system calls, not glibc's wrappers (which would try to change every
               // thread of a process that has only this one now).
               (::syscall(SYS_setgroups, identity->groups.size(), identity->groups.data()) != 0 ||
                ::syscall(SYS_setresgid, identity->gid, identity->gid, identity->gid) != 0 ||
                ::syscall(SYS_setresuid, identity->uid, identity->uid, identity->uid) != 0)) {
      err = errno;
    } else if (stage = 2; ::chdir(cwd) != 0 && [&] {
                 for (const char* dir : fallbacks) {
                   if (::chdir(dir) == 0) return false;
                 }
                 return true;
               }()) {
      err = errno;
    } else {
      stage = 3;
      err = ENOENT;
      for (const char* candidate : paths) {
        ::execve(candidate, argv.data(), envp.data());
        // As execvp: a program found but not runnable is the error, unless one later runs.
        if (errno != ENOENT && errno != ENOTDIR) err = errno;
      }
    }
    errno = err;
    int report_errno[2] = {stage, errno};
    ssize_t ignored = ::write(report[1], report_errno, sizeof report_errno);
    (void)ignored;
    ::_exit(127);
  }
  CloseFd(report[1]);
  if (pid < 0) {
    CloseFd(report[0]);
    return fail("cannot start the command");
  }
  ::close(child_in);
  if (!tty) {
    ::close(child_out);
    ::close(child_err);
  }
  child_in = child_out = child_err = -1;
  int report_errno[2] = {0, 0};
  // Until it execs (the report's end closes) or reports why it could not, within the
  // plan's limit: a start that never ends held the calling thread for ever, and the daemon
  // could not stop (attacker helper-91).
  const auto give_up_at = std::chrono::steady_clock::now() + plan.start_limit;
  ssize_t n = -1;
  bool too_slow = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up_at - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      too_slow = true;
      break;
    }
    pollfd ready{report[0], POLLIN, 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (polled < 0 && errno != EINTR) break;
    if (polled <= 0) continue;
    do {
      n = ::read(report[0], report_errno, sizeof report_errno);
    } while (n < 0 && errno == EINTR);
    break;
  }
  CloseFd(report[0]);
  if (too_slow) {
    ::kill(pid, SIGKILL);
    if (plan.reap_stuck) {
      plan.reap_stuck(pid);
    } else {
      // A thread waits for it; while too many do (children the kernel holds: a file system
      // that never answers), no more commands start (reviewer helper-92: one thread each,
      // uncapped, for every stuck `jcctl job exec`).
      stuck_starts.fetch_add(1);
      std::thread([pid] {
        ::waitpid(pid, nullptr, 0);
        stuck_starts.fetch_sub(1);
      }).detach();
    }
    ::close(out.input);
    if (out.output != out.input) ::close(out.output);
    if (out.errors >= 0) ::close(out.errors);
    return absl::DeadlineExceededError(absl::StrCat(
        "the command did not start within ", plan.start_limit.count(), " ms (its directory ",
        plan.cwd.empty() ? "/" : plan.cwd, " on a file system that does not answer, or the command stopped before it ran?)"));
  }
  if (n == sizeof report_errno) {
    ::waitpid(pid, nullptr, 0);
    // The adapter's ends go too (an attacker helper's finding: three descriptors leaked
    // for each command that could not start).
    ::close(out.input);
    if (out.output != out.input) ::close(out.output);
    if (out.errors >= 0) ::close(out.errors);
    errno = report_errno[1];
    const char* what[] = {"cannot join the task's cgroup", "cannot take the command's account", "cannot enter ",
                          "cannot run "};
    const int stage = report_errno[0] >= 0 && report_errno[0] <= 3 ? report_errno[0] : 3;
    return absl::FailedPreconditionError(absl::StrCat(
        what[stage], stage == 2 ? (plan.cwd.empty() ? "/" : plan.cwd) : stage == 3 ? plan.argv[0].substr(0, 64) : "",
        ": ", std::strerror(report_errno[1])));
  }
  // Input is written without blocking (PumpExec waits for room itself, and gives up once
  // the command is being ended): a command that never reads holds no adapter thread.
  ::fcntl(out.input, F_SETFL, ::fcntl(out.input, F_GETFL) | O_NONBLOCK);
  out.pid = pid;
  return out;
}

void PumpAttached(AttachedCommand command, ExecPeer& peer, const std::function<bool()>& still_running) {
  const pid_t pid = command.pid;
  std::atomic<bool> ending{false};          // the caller went: the command is being ended
  std::atomic<int64_t> ended_at_ms{0};      // when `ending` was set
  std::atomic<bool> output_done{false};
  std::atomic<bool> group_gone{false};      // its group was killed after it exited: never signalled again
  auto end_command = [&] {
    if (ending.exchange(true) || group_gone.load()) return;
    ended_at_ms = absl::ToUnixMillis(absl::Now());
    ::kill(-pid, SIGHUP);
    ::kill(-pid, SIGTERM);
    ::kill(-pid, SIGCONT);
  };

  if (!peer.Started()) end_command();

  // The command's output into frames, then its exit status; only this thread writes.
  std::thread out([&] {
    int output = command.output, errors = command.errors;
    bool caller_gone = ending.load();
    std::optional<int> status;
    absl::Time exited_at = absl::InfiniteFuture();
    std::string buf(kMaxPayload, '\0');
    auto send = [&](std::string data) {
      if (caller_gone) return;
      if (!peer.Send(std::move(data))) {
        caller_gone = true;
        end_command();
      }
    };
    auto reap = [&](int flags) {
      if (status.has_value()) return;
      int ws = 0;
      pid_t got = ::waitpid(pid, &ws, flags);
      if (got == pid) {
        status = ExitStatus(ws);
        exited_at = absl::Now();
      }
    };
    absl::Time checked = absl::Now();
    while (true) {
      if (peer.Cancelled()) {
        caller_gone = true;
        end_command();
      }
      // A command lives no longer than its replica (stopped, ended, its job gone).
      if (!status.has_value() && absl::Now() - checked >= absl::Seconds(1)) {
        checked = absl::Now();
        if (still_running && !still_running()) end_command();
      }
      if (ending.load() && !status.has_value() &&
          absl::ToUnixMillis(absl::Now()) - ended_at_ms.load() > 5000) {
        ::kill(-pid, SIGKILL);
      }
      reap(WNOHANG);
      // Output is read until its ends close, or for a second after the command exited
      // (something it left in the background may hold them open).
      bool open = output >= 0 || errors >= 0;
      if (!open && status.has_value()) break;
      if (status.has_value() && absl::Now() - exited_at > absl::Seconds(1)) break;
      if (!open) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      pollfd fds[2] = {{output, POLLIN, 0}, {errors, POLLIN, 0}};
      int ready = ::poll(fds, 2, 250);
      if (ready < 0 && errno != EINTR) break;
      for (int i = 0; i < 2 && ready > 0; ++i) {
        int& fd = i == 0 ? output : errors;
        if (fd < 0 || fds[i].revents == 0) continue;
        ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {  // closed (a terminal's master says EIO once no one holds it)
          if (i == 1) CloseFd(errors);
          output = i == 0 ? -1 : output;
          continue;
        }
        send(EncodeData(i == 0 ? Type::kStdout : Type::kStderr,
                                     absl::string_view(buf.data(), static_cast<size_t>(n))));
      }
    }
    while (!status.has_value()) {
      if (peer.Cancelled()) end_command();
      if (ending.load() && absl::ToUnixMillis(absl::Now()) - ended_at_ms.load() > 5000) ::kill(-pid, SIGKILL);
      reap(WNOHANG);
      if (!status.has_value()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // What it left in its group (in the background) ends with it: nothing it started runs
    // on unseen once its caller has the status (an attacker helper's finding). Once only:
    // an empty group's id may be another process's later.
    ::kill(-pid, SIGKILL);
    group_gone = true;
    if (command.errors >= 0) CloseFd(errors);
    send(EncodeExit(*status));
    if (!caller_gone) peer.Close();
    output_done = true;
    peer.Finished();
  });

  // The caller's frames: input, sizes, the end of input.
  Decoder decoder;
  int input = command.input;
  auto give_up = [&] { return ending.load() || output_done.load() || peer.Cancelled(); };
  auto end_input = [&] {
    if (input < 0) return;
    if (command.tty) {
      WriteAll(input, "\x04", give_up);  // ^D: the terminal's end of input; the fd is also the output
      input = -1;
    } else {
      CloseFd(input);
    }
  };
  std::string bytes;
  bool closed = false;
  while (true) {
    bytes.clear();
    closed = false;
    if (!peer.Receive(&bytes, &closed)) break;
    decoder.Feed(bytes);
    while (auto f = decoder.Next()) {
      switch (f->type) {
        case Type::kStdin:
          if (input >= 0 && !WriteAll(input, f->payload, give_up)) {
            if (!command.tty) CloseFd(input);
            input = -1;
          }
          break;
        case Type::kResize:
          if (auto size = ParseResize(f->payload); size.has_value() && command.tty) {
            SetSize(command.output, size->first, size->second);
          }
          break;
        case Type::kStdinEnd:
          end_input();
          break;
        default:
          break;  // output and exit frames are the command's to send
      }
    }
    // A broken stream ends the command and is read no further.
    if (decoder.broken()) {
      end_command();
      break;
    }
    if (closed) end_input();
  }
  // The caller sends no more: gone before the command ended, it ends the command.
  if (!output_done.load()) end_command();
  out.join();
  if (!command.tty) CloseFd(input);
  CloseFd(command.output);
}

}  // namespace jc::exec_stream
