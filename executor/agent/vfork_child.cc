#include "executor/agent/vfork_child.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__)
// clone3 for a child on its own stack that shares the caller's memory: glibc has no wrapper
// (its own is internal), and a child cannot return into the caller's frames on another
// stack, so the child calls fn(arg) here and exits with what it returns, as glibc's clone
// does. The registers r8 and r9 survive the system call; the child starts with the stack
// pointer at args->stack + args->stack_size. Returns the child's pid, or -errno.
extern "C" long jc_nexec_clone3_vm(struct clone_args* args, size_t size, int (*fn)(void*), void* arg);
__asm__(R"(
  .text
  .globl jc_nexec_clone3_vm
  .hidden jc_nexec_clone3_vm
  .type jc_nexec_clone3_vm, @function
jc_nexec_clone3_vm:
  .cfi_startproc
  movq %rdx, %r8
  movq %rcx, %r9
  movl $435, %eax
  syscall
  testq %rax, %rax
  jz 1f
  ret
1:
  .cfi_undefined rip
  xorl %ebp, %ebp
  movq %r9, %rdi
  callq *%r8
  movl %eax, %edi
  movl $60, %eax
  syscall
  hlt
  .cfi_endproc
  .size jc_nexec_clone3_vm, .-jc_nexec_clone3_vm
)");
#endif

namespace jc::nexec {
namespace {

std::atomic<bool> clone3_works{true};  // until a kernel (or seccomp filter) says otherwise

// The child's stack: its own, since the parent's frames stay live (CLONE_VFORK stops only
// the calling thread). The child does little before exec; a guard page below catches an
// overflow instead of letting it write into the heap.
constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kGuardBytes = 4096;

// One stack per thread that starts children, made at its first start and kept: a thread
// waits in clone until its child has exec'd or exited (CLONE_VFORK), so its stack is never
// in use twice at once. Mapping and unmapping one per start cost a TLB shootdown on every
// core each time (perf, issue 32 item 6).
class ChildStack {
 public:
  ~ChildStack() {
    if (base_ != nullptr) munmap(base_, kStackBytes + kGuardBytes);
  }
  // The top of the stack (it grows down); null when it cannot be mapped.
  char* Top() {
    if (base_ == nullptr) {
      void* mapped =
          mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
      if (mapped == MAP_FAILED) return nullptr;
      (void)mprotect(mapped, kGuardBytes, PROT_NONE);
      base_ = mapped;
    }
    return static_cast<char*>(base_) + kStackBytes + kGuardBytes;
  }

 private:
  void* base_ = nullptr;
};

std::atomic<int64_t> pre_exec_limit_ms{10'000};

// A child between clone and exec, as its starting thread registered it for the watchdog.
struct PreExecChild {
  // Written by the kernel as it makes the child (CLONE_PARENT_SETTID), before the child
  // runs: the watchdog knows whom to kill from the first moment the account could stop it.
  std::atomic<pid_t> pid{0};
  std::chrono::steady_clock::time_point started;
  PreExecKill killed = PreExecKill::kNone;  // under the watchdog's mutex
};
static_assert(sizeof(std::atomic<pid_t>) == sizeof(pid_t) && std::atomic<pid_t>::is_always_lock_free,
              "the kernel writes the pid as a plain pid_t");

// Whether `pid` is stopped (state T in /proc/<pid>/stat): a child before exec never stops
// on its own, nor does the agent stop it; whoever did holds the agent's launches. A child
// in a tracer's stop (t: root's strace or gdb) is left to the time limit.
bool Stopped(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ...": comm may hold anything, the last ')' ends it.
  const char* end = std::strrchr(buf, ')');
  return end != nullptr && end[1] == ' ' && end[2] == 'T';
}

// One thread for the agent's life that looks at every child before exec each kTick and
// SIGKILLs one that is stopped, or older than the limit. A child is looked at only once it
// is a tick old: a task's child execs within ~100 µs, so at thousands of starts a second
// the watchdog reads no /proc file, and it sleeps without a deadline while none is starting.
class PreExecWatchdog {
 public:
  static PreExecWatchdog& Get() {
    static PreExecWatchdog* const watchdog = new PreExecWatchdog;  // never destroyed: its thread runs on
    return *watchdog;
  }

  void Add(PreExecChild* child) {
    std::lock_guard<std::mutex> lock(mu_);
    children_.push_back(child);
    if (idle_) wake_.notify_one();
  }

  PreExecKill Remove(PreExecChild* child) {
    std::lock_guard<std::mutex> lock(mu_);
    children_.erase(std::find(children_.begin(), children_.end(), child));
    return child->killed;
  }

 private:
  static constexpr std::chrono::milliseconds kTick{50};

  PreExecWatchdog() {
    children_.reserve(64);
    // Its thread takes no signal (they are the agent's other threads' to handle).
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    std::thread([this] { Run(); }).detach();
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  }

  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (children_.empty()) {
        idle_ = true;
        wake_.wait(lock, [this] { return !children_.empty(); });
        idle_ = false;
      }
      wake_.wait_for(lock, kTick);
      const auto now = std::chrono::steady_clock::now();
      const std::chrono::milliseconds limit = PreExecLimit();
      for (PreExecChild* child : children_) {
        const pid_t pid = child->pid.load(std::memory_order_relaxed);
        if (child->killed != PreExecKill::kNone || pid <= 0 || now - child->started < kTick) continue;
        // Under the mutex, before its starter removed it: the pid is still the child's
        // (not reaped), and a child that exec'd meanwhile is killed as its starter is told.
        if (now - child->started >= limit) {
          child->killed = PreExecKill::kTooSlow;
        } else if (Stopped(pid)) {
          child->killed = PreExecKill::kStopped;
        } else {
          continue;
        }
        kill(pid, SIGKILL);
      }
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  bool idle_ = false;
  std::vector<PreExecChild*> children_;
};

struct Trampoline {
  int (*child)(void*);
  void* arg;
};

int RunChild(void* p) {
  auto* t = static_cast<Trampoline*>(p);
  DefaultCaughtSignals();
  return t->child(t->arg);
}

}  // namespace

void DefaultCaughtSignals() {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current {};
    // Raw calls: glibc's sigaction refuses its own internal signals, which is as wanted.
    if (sigaction(sig, nullptr, &current) != 0) continue;
    if (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN) continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    (void)sigaction(sig, &dfl, nullptr);
  }
}

int HighDescriptorBase() {
  static const int base = [] {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur < 4096) return 0;
    return static_cast<int>(std::min<rlim_t>(limit.rlim_cur / 2, 1 << 20));
  }();
  return base;
}

int KeepHigh(int fd) {
  const int base = HighDescriptorBase();
  if (fd < 0 || base <= 0 || fd >= base) return fd;
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, base);
  if (high < 0) return fd;
  close(fd);
  return high;
}

int UnshareLowDescriptors(int base) {
  if (base > 0 && syscall(SYS_close_range, static_cast<unsigned>(base), ~0U, CLOSE_RANGE_UNSHARE) == 0) return 0;
  return unshare(CLONE_FILES);
}

void SetPreExecLimit(std::chrono::milliseconds limit) {
  pre_exec_limit_ms.store(std::max<int64_t>(limit.count(), 1), std::memory_order_relaxed);
}

std::chrono::milliseconds PreExecLimit() {
  return std::chrono::milliseconds(pre_exec_limit_ms.load(std::memory_order_relaxed));
}

void UseClone3(bool use) { clone3_works.store(use, std::memory_order_relaxed); }

bool UsesClone3() {
#if defined(__x86_64__)
  return clone3_works.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

namespace {

// The clone itself (StartSharedMemoryChild): the child's pid written to `*tid` by the
// kernel as it makes it.
pid_t CloneSharingMemory(int (*child)(void*), void* arg, bool share_descriptors, pid_t* tid) {
  thread_local ChildStack stack;
  char* top = stack.Top();
  if (top == nullptr) return -1;
  // Every signal blocked across the clone: the child starts with this mask, and no handler
  // of the agent's may run in it before DefaultCaughtSignals.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = -1;
  int err = 0;
#if defined(__x86_64__)
  // The kernel resets every caught signal to its default as it makes the child
  // (CLONE_CLEAR_SIGHAND, Linux 5.5): the child need not ask for each of the 64 and reset
  // them itself, 7% of its work before exec (perf, issue 48). A kernel or seccomp filter
  // without clone3 answers ENOSYS (EINVAL: without the flag), and clone does it as before.
  if (clone3_works.load(std::memory_order_relaxed)) {
    struct clone_args args {};
    args.flags = CLONE_VM | CLONE_VFORK | CLONE_CLEAR_SIGHAND | CLONE_PARENT_SETTID |
                 (share_descriptors ? CLONE_FILES : 0);
    args.parent_tid = reinterpret_cast<uint64_t>(tid);
    args.exit_signal = SIGCHLD;
    args.stack = reinterpret_cast<uint64_t>(top - kStackBytes);
    args.stack_size = kStackBytes;
    const long r = jc_nexec_clone3_vm(&args, sizeof args, child, arg);
    if (r == -ENOSYS || r == -EINVAL || r == -EPERM) {
      clone3_works.store(false, std::memory_order_relaxed);
    } else {
      pid = r < 0 ? -1 : static_cast<pid_t>(r);
      err = r < 0 ? static_cast<int>(-r) : 0;
      pthread_sigmask(SIG_SETMASK, &saved, nullptr);
      errno = err;
      return pid;
    }
  }
#endif
  Trampoline trampoline{child, arg};
  pid = clone(RunChild, top, CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | (share_descriptors ? CLONE_FILES : 0) | SIGCHLD,
              &trampoline, tid);
  err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  errno = err;
  return pid;
}

}  // namespace

pid_t StartSharedMemoryChild(int (*child)(void*), void* arg, bool share_descriptors, PreExecKill* killed) {
  PreExecWatchdog& watchdog = PreExecWatchdog::Get();
  PreExecChild watched;
  watched.started = std::chrono::steady_clock::now();
  watchdog.Add(&watched);
  const pid_t pid = CloneSharingMemory(child, arg, share_descriptors, reinterpret_cast<pid_t*>(&watched.pid));
  const int err = errno;
  const PreExecKill kill = watchdog.Remove(&watched);
  if (killed != nullptr) *killed = kill;
  errno = err;
  return pid;
}

}  // namespace jc::nexec
