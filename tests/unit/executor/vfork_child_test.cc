// A task's child before exec shares the agent's memory (executor/agent/vfork_child.h): no
// handler of the agent's may run in it, so it starts with every caught signal back at its
// default — reset by the kernel as it makes the child (clone3's CLONE_CLEAR_SIGHAND), or by
// the child itself (clone, kernels before 5.5) — and an ignored signal stays ignored.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_join.h"

#include "common/exec/attached_command.h"
#include "common/exec/close_descriptors.h"
#include "tests/testing/process.h"
#include "executor/agent/user_files.h"
#include "executor/agent/vfork_child.h"

namespace {

// Written by the handler: in a child sharing this memory it would show the child's pid.
std::atomic<long> handled_in{0};

void OnUsr1(int) { handled_in.store(syscall(SYS_getpid)); }

// Unblocks everything, is sent SIGUSR2 (ignored: goes on) then SIGUSR1 (its default ends
// it; the test's handler would have returned, and the child exited 0).
int SignalledChild(void*) {
  sigset_t none;
  sigemptyset(&none);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, sizeof(long));
  const long self = syscall(SYS_getpid);
  syscall(SYS_kill, self, SIGUSR2);
  syscall(SYS_kill, self, SIGUSR1);
  syscall(SYS_exit, 0);
  return 0;
}

// x86-64 and Linux 5.5 or later: clone3 with CLONE_CLEAR_SIGHAND must be the way taken.
bool KernelHasClearSighand() {
#if defined(__x86_64__)
  utsname u{};
  int major = 0, minor = 0;
  return uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
         (major > 5 || (major == 5 && minor >= 5));
#else
  return false;
#endif
}

}  // namespace

TEST_CASE("a child sharing the agent's memory starts with every caught signal at its default and every ignored one "
          "ignored, whether the kernel or the child resets them",
          "[B11][C6]") {
  const bool clone3 = GENERATE(true, false);
  CAPTURE(clone3);
  const bool before = jc::nexec::UsesClone3();
  if (clone3 && !KernelHasClearSighand()) {
    WARN("SKIPPED: clone3 with CLONE_CLEAR_SIGHAND needs x86-64 and Linux 5.5: the clone way is tested");
    return;
  }
  jc::nexec::UseClone3(clone3);
  struct sigaction usr1 {}, old_usr1 {}, ignore {}, old_usr2 {};
  usr1.sa_handler = OnUsr1;
  sigemptyset(&usr1.sa_mask);
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  REQUIRE(sigaction(SIGUSR1, &usr1, &old_usr1) == 0);
  REQUIRE(sigaction(SIGUSR2, &ignore, &old_usr2) == 0);
  handled_in = 0;
  const pid_t pid = jc::nexec::StartSharedMemoryChild(SignalledChild, nullptr);
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGUSR1);  // not SIGUSR2 (it stayed ignored), not an exit (no handler ran)
  CHECK(handled_in == 0);
  CHECK(jc::nexec::UsesClone3() == clone3);  // the way asked for is the way taken (no fallback)
  // The agent's own handler is untouched.
  struct sigaction now {};
  REQUIRE(sigaction(SIGUSR1, nullptr, &now) == 0);
  CHECK(now.sa_handler == OnUsr1);
  sigaction(SIGUSR1, &old_usr1, nullptr);
  sigaction(SIGUSR2, &old_usr2, nullptr);
  jc::nexec::UseClone3(before);
}

// The bounded wait for a child before exec (attacker helper-81): a task's child holds the agent's launching
// thread until it execs, so one stopped, or one that never gets there, must not hold it.
namespace {

// Shared with the children below (they share this memory until they exec or exit).
std::atomic<pid_t> child_pid{0};
std::atomic<int> phase{0};
const jc::nexec::Account* act_as = nullptr;
std::string thaw_on_rescue;  // a freezer.state Rescue thaws

void Nap() {
  timespec ms{0, 1'000'000};
  syscall(SYS_nanosleep, &ms, nullptr);
}

int StopsItself(void*) {
  const pid_t self = static_cast<pid_t>(syscall(SYS_getpid));
  child_pid = self;
  syscall(SYS_kill, self, SIGSTOP);
  syscall(SYS_exit, 0);
  return 0;
}

int NeverExecs(void*) {
  child_pid = static_cast<pid_t>(syscall(SYS_getpid));
  while (phase.load() != 99) Nap();
  syscall(SYS_exit, 0);
  return 0;
}

int ExitsThree(void*) {
  syscall(SYS_exit, 3);
  return 3;
}

// Acts as the account (ActAsAccount), waits; becomes it (FinishBecomingAccount), waits:
// the test's attacker, that account, tries to stop it at each step.
int ActsThenBecomes(void*) {
  sigset_t none;
  sigemptyset(&none);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, sizeof(long));
  if (jc::nexec::ActAsAccount(*act_as) != 0) syscall(SYS_exit, 10);
  child_pid = static_cast<pid_t>(syscall(SYS_getpid));
  phase = 1;
  while (phase.load() == 1) Nap();
  if (jc::nexec::FinishBecomingAccount(*act_as) != 0) syscall(SYS_exit, 11);
  phase = 3;
  while (phase.load() != 99) Nap();
  syscall(SYS_exit, 0);
  return 0;
}

// Kills the child the test started if its starter did not within `limit`: a failing test
// must end, not hang.
class Rescue {
 public:
  explicit Rescue(std::chrono::seconds limit)
      : thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) {
            rescued_ = true;
            phase = 99;
            if (child_pid > 0) kill(child_pid, SIGKILL);
            if (!thaw_on_rescue.empty()) {  // a frozen child dies only once thawed
              const int fd = open(thaw_on_rescue.c_str(), O_WRONLY | O_CLOEXEC);
              if (fd >= 0) (void)!write(fd, "THAWED", 6), close(fd);
            }
          }
        }) {}
  ~Rescue() { Done(); }
  // The start returned: no rescue. Whether one was needed.
  bool Done() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    done_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return rescued_;
  }

 private:
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::atomic<bool> rescued_{false};
  std::thread thread_;
};

// The account's own attempt to stop `pid`: 0 when it stopped it, else the errno.
int StopAs(const jc::nexec::Account& account, pid_t pid) {
  const pid_t attacker = fork();
  if (attacker == 0) {
    if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, account.gid, account.gid, account.gid) != 0 ||
        syscall(SYS_setresuid, account.uid, account.uid, account.uid) != 0) {
      _exit(100);
    }
    _exit(syscall(SYS_kill, pid, SIGSTOP) == 0 ? 0 : errno);
  }
  int status = 0;
  waitpid(attacker, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Sets the pre-exec limit for a test and puts the old one back however the test ends.
struct PreExecLimitFor {
  explicit PreExecLimitFor(std::chrono::milliseconds limit) : before(jc::nexec::PreExecLimit()) {
    jc::nexec::SetPreExecLimit(limit);
  }
  ~PreExecLimitFor() { jc::nexec::SetPreExecLimit(before); }
  std::chrono::milliseconds before;
};

bool WaitForPhase(int want) {
  for (int i = 0; i < 10'000 && phase.load() != want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return phase.load() == want;
}

}  // namespace

TEST_CASE("a child stopped before exec is killed and reaped, and its starter is told, so it holds no launch",
          "[B11][C6]") {
  child_pid = 0;
  phase = 0;
  Rescue rescue(std::chrono::seconds(20));
  jc::nexec::PreExecKill killed = jc::nexec::PreExecKill::kNone;
  const auto began = std::chrono::steady_clock::now();
  const pid_t pid = jc::nexec::StartSharedMemoryChild(StopsItself, nullptr, false, &killed);
  REQUIRE_FALSE(rescue.Done());
  REQUIRE(pid > 0);
  CHECK(killed == jc::nexec::PreExecKill::kStopped);
  CHECK(waitpid(pid, nullptr, WNOHANG) == -1);  // reaped already: a killed child is never left to its caller
  // Long before the time limit (10 s): a stop is answered at the next look.
  CHECK(std::chrono::steady_clock::now() - began < jc::nexec::PreExecLimit());
}

TEST_CASE("a child that has not exec'd within the limit is killed, and one that exits is left alone", "[B11][C6]") {
  PreExecLimitFor limit(std::chrono::milliseconds(300));
  child_pid = 0;
  phase = 0;
  {
    Rescue rescue(std::chrono::seconds(20));
    jc::nexec::PreExecKill killed = jc::nexec::PreExecKill::kNone;
    const auto began = std::chrono::steady_clock::now();
    const pid_t pid = jc::nexec::StartSharedMemoryChild(NeverExecs, nullptr, false, &killed);
    const auto took = std::chrono::steady_clock::now() - began;
    REQUIRE_FALSE(rescue.Done());
    REQUIRE(pid > 0);
    CHECK(killed == jc::nexec::PreExecKill::kTooSlow);
    CHECK(took >= std::chrono::milliseconds(300));
    CHECK(waitpid(pid, nullptr, WNOHANG) == -1);  // reaped already
  }
  jc::nexec::PreExecKill killed = jc::nexec::PreExecKill::kStopped;
  const pid_t pid = jc::nexec::StartSharedMemoryChild(ExitsThree, nullptr, false, &killed);
  REQUIRE(pid > 0);
  CHECK(killed == jc::nexec::PreExecKill::kNone);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 3));
}

TEST_CASE("the task's account cannot stop its child while it acts as the account before exec, and a stop in the moment "
          "after it became the account is answered by its starter",
          "[B11][C6]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: a child acts as another account only when the agent is root; this run is not root");
    return;
  }
  auto nobody = jc::nexec::LookupAccount("nobody");
  REQUIRE(nobody.ok());
  act_as = &*nobody;
  child_pid = 0;
  phase = 0;
  Rescue rescue(std::chrono::seconds(30));
  int stop_while_acting = -2, stop_after = -2;
  std::thread attacker([&] {
    if (!WaitForPhase(1)) return;
    stop_while_acting = StopAs(*nobody, child_pid);
    phase = 2;
    if (!WaitForPhase(3)) return;
    stop_after = StopAs(*nobody, child_pid);
  });
  jc::nexec::PreExecKill killed = jc::nexec::PreExecKill::kNone;
  const pid_t pid = jc::nexec::StartSharedMemoryChild(ActsThenBecomes, nullptr, false, &killed);
  attacker.join();
  REQUIRE_FALSE(rescue.Done());
  REQUIRE(pid > 0);
  CHECK(stop_while_acting == EPERM);  // its real and saved uid are still root's
  CHECK(stop_after == 0);             // the moment before exec: the account may
  CHECK(killed == jc::nexec::PreExecKill::kStopped);
  CHECK(waitpid(pid, nullptr, WNOHANG) == -1);  // reaped already
}

namespace {

int freezer_tasks_fd = -1;  // the test's freezer cgroup's tasks file, for the child below

// Joins the test's freezer cgroup, then waits: frozen there, it is in an uninterruptible
// wait (state D) that SIGKILL does not end until the cgroup thaws, as a child blocked on a
// FUSE file system whose daemon never answers is (attacker helper-82).
int FrozenBeforeExec(void*) {
  if (syscall(SYS_write, freezer_tasks_fd, "0", 1) != 1) syscall(SYS_exit, 12);
  child_pid = static_cast<pid_t>(syscall(SYS_getpid));
  phase = 1;
  while (phase.load() != 99) Nap();
  syscall(SYS_exit, 0);
  return 0;
}

bool WriteFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

}  // namespace

TEST_CASE("a child killed before exec that stays in an uninterruptible wait is given up, not waited for, and reaped "
          "once it ends",
          "[B11][C6]") {
  const std::string root = "/sys/fs/cgroup/freezer";
  if (geteuid() != 0 || access((root + "/tasks").c_str(), W_OK) != 0) {
    WARN("SKIPPED: needs root and a cgroup v1 freezer hierarchy (a frozen task there stays in state D when killed)");
    return;
  }
  const std::string dir = root + "/jc-vfork-test-" + std::to_string(getpid());
  REQUIRE(mkdir(dir.c_str(), 0755) == 0);
  freezer_tasks_fd = open((dir + "/tasks").c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(freezer_tasks_fd >= 0);
  const size_t abandoned_before = jc::nexec::AbandonedChildren();
  PreExecLimitFor limit(std::chrono::milliseconds(300));
  child_pid = 0;
  phase = 0;
  std::atomic<bool> frozen{false};
  thaw_on_rescue = dir + "/freezer.state";
  std::thread freezer([&] {
    if (!WaitForPhase(1)) return;
    frozen = WriteFile(dir + "/freezer.state", "FROZEN");
  });
  Rescue rescue(std::chrono::seconds(30));
  jc::nexec::PreExecKill killed = jc::nexec::PreExecKill::kNone;
  const auto began = std::chrono::steady_clock::now();
  const pid_t pid = jc::nexec::StartSharedMemoryChild(FrozenBeforeExec, nullptr, false, &killed);
  const auto took = std::chrono::steady_clock::now() - began;
  freezer.join();
  const bool rescued = rescue.Done();
  REQUIRE(frozen);
  CHECK_FALSE(rescued);
  REQUIRE(pid > 0);
  CHECK(killed == jc::nexec::PreExecKill::kTooSlow);
  CHECK(took < std::chrono::seconds(10));  // the limit, the grace and a look: not for ever
  CHECK(jc::nexec::AbandonedChildren() == abandoned_before + 1);
  // The thread starts the next child on a slot of its own.
  jc::nexec::PreExecKill next_killed = jc::nexec::PreExecKill::kStopped;
  const pid_t next = jc::nexec::StartSharedMemoryChild(ExitsThree, nullptr, false, &next_killed);
  REQUIRE(next > 0);
  CHECK(next_killed == jc::nexec::PreExecKill::kNone);
  int status = 0;
  REQUIRE(waitpid(next, &status, 0) == next);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 3));
  // Thawed, the killed child ends, and is reaped as a given-up child.
  REQUIRE(WriteFile(dir + "/freezer.state", "THAWED"));
  bool reaped = false;
  for (int i = 0; i < 1000 && !reaped; ++i) {
    reaped = jc::nexec::ReapIfAbandoned(pid);
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(reaped);
  CHECK(jc::nexec::AbandonedChildren() == abandoned_before);
  thaw_on_rescue.clear();
  close(freezer_tasks_fd);
  rmdir(dir.c_str());
}

// What a child the kernel may hold for good keeps of the agent's descriptors (reviewer,
// session 82): a child walking an account's paths (a task's before exec, an open-as-account
// helper) can be given up in an uninterruptible wait, and a copy of the agent's listening
// socket it held outlived the agent (with SO_REUSEPORT, a restarted agent shared its address
// with a socket nobody accepts on).
namespace {

// A TCP socket listening on loopback: the agent's own, as a child would see it.
int ListeningSocket() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 4) != 0) return -1;
  return fd;
}

// The descriptors `pid` holds, as "N -> target" lines.
std::vector<std::string> DescriptorsOf(pid_t pid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code ignored;
    out.push_back(e.path().filename().string() + " -> " + std::filesystem::read_symlink(e.path(), ignored).string());
  }
  return out;
}

// This process's children, every thread's.
std::vector<pid_t> ChildrenOfThisProcess() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream children(t.path() / "children");
    pid_t pid = 0;
    while (children >> pid) out.push_back(pid);
  }
  return out;
}

int keep_a = -1, keep_b = -1, drop = -1;
bool keep_stdin = false;  // stdin among the kept (as the exec stream's child keeps its own)
dev_t null_device = 0;    // /dev/null's device number

// Keeps keep_a and keep_b (and stdin when keep_stdin), and says by its exit code what it
// holds: bit 0 keep_a, bit 1 keep_b, bit 2 drop, bit 3 stdin is /dev/null, bit 4 stdin is a
// pipe (what the test made it).
int KeepsTwo(void*) {
  const int keep[] = {keep_b, keep_a, keep_stdin ? 0 : -1};
  jc::CloseDescriptorsBut(keep, 3);
  auto open_now = [](int fd) { return syscall(SYS_fcntl, fd, F_GETFD) >= 0; };
  struct stat in {};
  const bool in_known = syscall(SYS_fstat, 0, &in) == 0;
  const bool in_null = in_known && S_ISCHR(in.st_mode) && in.st_rdev == null_device;
  const bool in_pipe = in_known && S_ISFIFO(in.st_mode);
  syscall(SYS_exit, (open_now(keep_a) ? 1 : 0) | (open_now(keep_b) ? 2 : 0) | (open_now(drop) ? 4 : 0) |
                        (in_null ? 8 : 0) | (in_pipe ? 16 : 0));
  return 0;
}

}  // namespace

TEST_CASE("a child before exec keeps only the descriptors it is given, not the agent's listening socket nor its "
          "standard input and output [B11][C6]",
          "[B11][C6]") {
  drop = ListeningSocket();
  REQUIRE(drop >= 0);
  keep_a = open("/dev/null", O_RDONLY | O_CLOEXEC);
  keep_b = open("/dev/null", O_WRONLY | O_CLOEXEC);
  REQUIRE((keep_a >= 0 && keep_b >= 0));
  struct stat null_stat {};
  REQUIRE(stat("/dev/null", &null_stat) == 0);
  null_device = null_stat.st_rdev;
  const bool share = GENERATE(false, true);
  // And as on a kernel without close_range (before 5.9; reviewer helper-92).
  const bool close_range = GENERATE(true, false);
  keep_stdin = GENERATE(false, true);
  CAPTURE(share, close_range, keep_stdin);
  jc::UseCloseRange(close_range);
  // The agent's stdin a pipe (whoever started it holds the other end) while the child starts.
  int pipe_ends[2];
  REQUIRE(pipe2(pipe_ends, O_CLOEXEC) == 0);
  const int saved_stdin = fcntl(0, F_DUPFD_CLOEXEC, 3);
  REQUIRE(saved_stdin >= 0);
  REQUIRE(dup2(pipe_ends[0], 0) == 0);
  // Shared: the child takes a table of its own first, as a task's does.
  const pid_t pid = jc::nexec::StartSharedMemoryChild(
      share ? +[](void* arg) -> int {
        if (jc::nexec::UnshareLowDescriptors(std::max({keep_a, keep_b, drop}) + 1) != 0) syscall(SYS_exit, 99);
        return KeepsTwo(arg);
      }
            : KeepsTwo,
      nullptr, share);
  int status = 0;
  const bool reaped = pid > 0 && waitpid(pid, &status, 0) == pid;
  dup2(saved_stdin, 0);
  close(saved_stdin);
  close(pipe_ends[0]);
  close(pipe_ends[1]);
  REQUIRE(reaped);
  REQUIRE(WIFEXITED(status));
  jc::UseCloseRange(true);
  // Both kept, the socket gone; stdin /dev/null, or the pipe when it was kept.
  CHECK(WEXITSTATUS(status) == (1 | 2 | (keep_stdin ? 16 : 8)));
  // This process's own are untouched.
  CHECK(fcntl(drop, F_GETFD) >= 0);
  close(keep_a);
  close(keep_b);
  close(drop);
}

TEST_CASE("an open-as-account helper that waits holds none of the agent's descriptors but its answer's socket "
          "[B11][C6]",
          "[B11][C6]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: only a root agent opens through a helper");
    return;
  }
  auto account = jc::nexec::LookupAccount("");
  REQUIRE(account.ok());
  const bool close_range = GENERATE(true, false);  // false: as on a kernel before 5.9
  CAPTURE(close_range);
  jc::UseCloseRange(close_range);
  const int listener = ListeningSocket();
  REQUIRE(listener >= 0);
  const std::string listener_inode = [&] {
    std::error_code ec;
    return std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(listener), ec).string();
  }();
  REQUIRE(listener_inode.rfind("socket:", 0) == 0);
  // A FIFO nobody writes to: the helper's open for reading waits until someone does.
  const auto dir = std::filesystem::temp_directory_path() / ("jc-vfork-fds-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "fifo").string();
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const std::vector<pid_t> before = ChildrenOfThisProcess();
  // The agent's stdin a pipe (whoever started it holds the other end) while the helper starts.
  int pipe_ends[2];
  REQUIRE(pipe2(pipe_ends, O_CLOEXEC) == 0);
  const int saved_stdin = fcntl(0, F_DUPFD_CLOEXEC, 3);
  REQUIRE(saved_stdin >= 0);
  REQUIRE(dup2(pipe_ends[0], 0) == 0);
  absl::Cleanup restore_stdin = [&] {
    dup2(saved_stdin, 0);
    close(saved_stdin);
    close(pipe_ends[0]);
    close(pipe_ends[1]);
  };
  absl::StatusOr<jc::nexec::OwnedFd> opened = absl::UnknownError("not yet");
  std::thread opener([&] { opened = jc::nexec::OpenAs(*account, fifo, O_RDONLY, 0, false); });
  pid_t helper = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (helper == 0 && std::chrono::steady_clock::now() < deadline) {
    for (pid_t p : ChildrenOfThisProcess()) {
      if (std::find(before.begin(), before.end(), p) == before.end()) helper = p;
    }
    if (helper == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(helper > 0);
  // Past its first steps (the descriptors go before it opens anything): it waits in the open.
  std::string state;
  while (state != "S" && std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(helper) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close_paren = line.rfind(')');
    state = close_paren == std::string::npos ? "" : line.substr(close_paren + 2, 1);
    if (state != "S") std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::vector<std::string> held = DescriptorsOf(helper);
  jc::UseCloseRange(true);
  std::move(restore_stdin).Invoke();
  // Released: someone opens the FIFO for writing.
  const int writer = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  opener.join();
  INFO(absl::StrJoin(held, "\n"));
  CHECK(state == "S");
  // stdin, stdout, stderr, its answer's socket and what its walk opened: no socket of ours.
  CHECK(std::count_if(held.begin(), held.end(), [](const std::string& fd) {
          return fd.find("socket:") != std::string::npos;
        }) == 1);
  for (const std::string& fd : held) CHECK(fd.find(listener_inode) == std::string::npos);
  // Its stdin, stdout and stderr /dev/null: not the pipes or terminal of whoever started the
  // agent, whose reader would wait for their end for as long as a helper held in the kernel lives.
  for (const char* standard : {"0 -> ", "1 -> ", "2 -> "}) {
    CHECK(std::count(held.begin(), held.end(), std::string(standard) + "/dev/null") == 1);
  }
  CHECK(writer >= 0);
  CHECK(opened.ok());
  if (writer >= 0) close(writer);
  close(listener);
  std::filesystem::remove_all(dir);
}

TEST_CASE("commands killed before they start that stay in the kernel hold a thread each, and past the most a process "
          "allows no more start until they end [A17][C6]",
          "[A17][C6]") {
  const std::string root = "/sys/fs/cgroup/freezer";
  if (geteuid() != 0 || access((root + "/tasks").c_str(), W_OK) != 0) {
    WARN("SKIPPED: needs root and a cgroup v1 freezer hierarchy (a frozen task stays when killed)");
    return;
  }
  const std::string dir = root + "/jc-exec-stuck-" + std::to_string(getpid());
  REQUIRE(mkdir(dir.c_str(), 0755) == 0);
  REQUIRE(WriteFile(dir + "/freezer.state", "FROZEN"));
  const int tasks = open((dir + "/tasks").c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(tasks >= 0);
  jc::exec_stream::SetMaxStuckStarts(1);
  // Its start joins the frozen cgroup (as a command's start that a file system never
  // answers), so it is still there when killed at its limit.
  jc::exec_stream::CommandPlan stuck;
  stuck.argv = {"true"};
  stuck.env = {"PATH=/usr/bin:/bin"};
  stuck.start_limit = std::chrono::milliseconds(200);
  stuck.in_child = [tasks]() -> int { return ::write(tasks, "0", 1) == 1 ? 0 : -1; };
  auto first = jc::exec_stream::StartAttached(stuck, false, 0, 0);
  CHECK(first.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(jc::exec_stream::StuckStarts() == 1);
  jc::exec_stream::CommandPlan plain;
  plain.argv = {"true"};
  plain.env = {"PATH=/usr/bin:/bin"};
  auto refused = jc::exec_stream::StartAttached(plain, false, 0, 0);
  CHECK(refused.status().code() == absl::StatusCode::kUnavailable);
  CHECK(refused.status().message().find("still wait in the kernel") != std::string::npos);
  // Thawed, it ends, its thread with it, and commands start again.
  REQUIRE(WriteFile(dir + "/freezer.state", "THAWED"));
  CHECK(jc::testing::WaitUntil([] { return jc::exec_stream::StuckStarts() == 0; }));
  auto again = jc::exec_stream::StartAttached(plain, false, 0, 0);
  CHECK(again.ok());
  if (again.ok()) {
    ::close(again->input);
    ::close(again->output);
    if (again->errors >= 0) ::close(again->errors);
    ::waitpid(again->pid, nullptr, 0);
  }
  jc::exec_stream::SetMaxStuckStarts(jc::exec_stream::kMaxStuckStarts);
  close(tasks);
  rmdir(dir.c_str());
}
