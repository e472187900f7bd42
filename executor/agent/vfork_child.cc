#include "executor/agent/vfork_child.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

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
std::atomic<int64_t> pre_exec_limit_ms{10'000};

// The child's stack: its own, since the parent's frames stay live. The child does little
// before exec; a guard page below catches an overflow instead of letting it write into the
// heap.
constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kGuardBytes = 4096;
// How often the starting thread looks at a child that has not exec'd yet (Stopped), and
// from what age: a task's child execs within ~100 µs, so at thousands of starts a second
// no /proc file is read.
constexpr std::chrono::milliseconds kLook{50};
// How long a killed child may take to go before it is looked at for an uninterruptible wait.
constexpr std::chrono::milliseconds kKillGrace{200};

// What a child uses of the agent's memory while it runs before exec, besides what its
// function reads: its stack, and the words the kernel writes. One per thread that starts
// children, made at its first start and kept (mapping and unmapping a stack per start cost
// a TLB shootdown on every core each time: perf, issue 32 item 6); a thread's next child
// starts only once the last one exec'd or exited — or was given up (Abandoned), when the slot
// goes with it.
struct ChildSlot {
  ~ChildSlot() {
    if (base != nullptr) munmap(base, kStackBytes + kGuardBytes);
  }
  // The top of the stack (it grows down); null when it cannot be mapped.
  char* Top() {
    if (base == nullptr) {
      void* mapped =
          mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
      if (mapped == MAP_FAILED) return nullptr;
      (void)mprotect(mapped, kGuardBytes, PROT_NONE);
      base = mapped;
    }
    return static_cast<char*>(base) + kStackBytes + kGuardBytes;
  }

  void* base = nullptr;
  // Set before the clone; the kernel zeroes it and wakes its futex when the child lets go of
  // the agent's memory, at exec or at exit (CLONE_CHILD_CLEARTID: what pthread_join waits
  // on). Not CLONE_VFORK: the kernel's wait for a vfork child cannot be bounded, and a
  // child in an uninterruptible wait (a FUSE file system of the account's that takes a
  // request and never answers: attacker helper-82) would hold this thread, and every
  // launch, for ever.
  std::atomic<pid_t> running{0};
};
static_assert(sizeof(std::atomic<pid_t>) == sizeof(pid_t) && std::atomic<pid_t>::is_always_lock_free,
              "the kernel writes this word as a plain pid_t");

// The system calls the starting thread makes while its child runs, without errno: the child
// runs on this thread's thread-local storage (clone without CLONE_SETTLS), so errno is one
// word for both, and the thread no longer sleeps in the kernel as a vfork parent did; a
// failed call of its own (a futex wait's ETIMEDOUT, every look) could change what the child
// reads in errno after a call of its (a missing directory taken for one it may not enter:
// reviewer, session 81). -errno, or the result.
long RawCall(long number, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0) {
#if defined(__x86_64__)
  long result;
  register long r10 __asm__("r10") = a4;
  __asm__ volatile("syscall" : "=a"(result) : "a"(number), "D"(a1), "S"(a2), "d"(a3), "r"(r10) : "rcx", "r11", "memory");
  return result;
#else
  // Elsewhere glibc's wrapper, which sets errno on failure: the window is the one above.
  const long r = syscall(number, a1, a2, a3, a4);
  return r == -1 ? -errno : r;
#endif
}

// Children the agent stopped waiting for: killed, but in an uninterruptible wait. Each is
// reaped once it ended (the task runner's reaper, through ReapIfAbandoned), and its slot,
// which the kernel still writes at its exit, freed then.
class Abandoned {
 public:
  static Abandoned& Get() {
    static Abandoned* const abandoned = new Abandoned;  // never destroyed: children may outlive statics
    return *abandoned;
  }
  // A child given up twice (by StartSharedMemoryChild with its slot, then by its caller's
  // ReapOrAbandon) keeps the first entry: its slot stays until it is reaped.
  void Add(pid_t pid, std::unique_ptr<ChildSlot> slot, uid_t account) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = children_.emplace(pid, Child{std::move(slot), account});
    if (!added && it->second.account == kNoAccount) it->second.account = account;
  }
  bool ReapIf(pid_t pid) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = children_.find(pid);
    if (it == children_.end() || waitpid(pid, nullptr, WNOHANG) != pid) return false;
    children_.erase(it);
    return true;
  }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mu_);
    return children_.size();
  }
  size_t CountOf(uid_t account) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [pid, child] : children_) n += child.account == account ? 1 : 0;
    return n;
  }

 private:
  struct Child {
    std::unique_ptr<ChildSlot> slot;  // null: a child that shared nothing
    uid_t account;
  };
  std::mutex mu_;
  std::map<pid_t, Child> children_;
};

// The state letter of `pid` in /proc/<pid>/stat ("pid (comm) S ..."), or 0. No errno
// (RawCall).
char ProcessState(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const long fd = RawCall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  const long n = RawCall(SYS_read, fd, reinterpret_cast<long>(buf), sizeof buf - 1);
  RawCall(SYS_close, fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* end = std::strrchr(buf, ')');  // comm may hold anything, the last ')' ends it
  return end != nullptr && end[1] == ' ' ? end[2] : 0;
}

struct Trampoline {
  int (*child)(void*);
  void* arg;
};

int RunChild(void* p) {
  auto* t = static_cast<Trampoline*>(p);
  DefaultCaughtSignals();
  return t->child(t->arg);
}

// The clone itself: the child on `slot`'s stack, sharing this memory, and slot.running
// zeroed by the kernel when it execs or exits.
pid_t CloneSharingMemory(int (*child)(void*), void* arg, bool share_descriptors, ChildSlot& slot, char* top) {
  // Every signal blocked across the clone: the child starts with this mask, and no handler
  // of the agent's may run in it before DefaultCaughtSignals.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = -1;
  int err = 0;
  const uint64_t shared = CLONE_VM | CLONE_CHILD_CLEARTID | (share_descriptors ? CLONE_FILES : 0);
#if defined(__x86_64__)
  // The kernel resets every caught signal to its default as it makes the child
  // (CLONE_CLEAR_SIGHAND, Linux 5.5): the child need not ask for each of the 64 and reset
  // them itself, 7% of its work before exec (perf, issue 48). A kernel or seccomp filter
  // without clone3 answers ENOSYS (EINVAL: without the flag), and clone does it as before.
  if (clone3_works.load(std::memory_order_relaxed)) {
    struct clone_args args {};
    args.flags = shared | CLONE_CLEAR_SIGHAND;
    args.child_tid = reinterpret_cast<uint64_t>(&slot.running);
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
  static thread_local Trampoline trampoline;  // read by the child as it starts; this thread waits meanwhile
  trampoline = Trampoline{child, arg};
  pid = clone(RunChild, top, static_cast<int>(shared) | SIGCHLD, &trampoline, nullptr, nullptr,
              reinterpret_cast<pid_t*>(&slot.running));
  err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  errno = err;
  return pid;
}

// Waits on slot.running's futex for at most `timeout`. The kernel's wake at the child's exec
// or exit is a shared one (as for pthread_join), so the wait is not FUTEX_PRIVATE.
void WaitForRelease(ChildSlot& slot, pid_t expected, std::chrono::milliseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000), static_cast<long>(timeout.count() % 1000) * 1'000'000};
  (void)RawCall(SYS_futex, reinterpret_cast<long>(&slot.running), FUTEX_WAIT, expected, reinterpret_cast<long>(&ts));
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

pid_t StartSharedMemoryChild(int (*child)(void*), void* arg, bool share_descriptors, PreExecKill* killed,
                             uid_t account) {
  thread_local std::unique_ptr<ChildSlot> slot;
  if (!slot) slot = std::make_unique<ChildSlot>();
  char* top = slot->Top();
  if (top == nullptr) return -1;
  constexpr pid_t kRunning = 1;
  slot->running.store(kRunning, std::memory_order_relaxed);
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = CloneSharingMemory(child, arg, share_descriptors, *slot, top);
  if (pid < 0) return -1;
  // Until the child execs or exits this thread waits, as a vfork parent would, and looks at
  // it every kLook: one stopped (its account's SIGSTOP in the moment after it became the
  // account, ^Z on its terminal) or older than the limit is killed. A killed child that
  // stays in an uninterruptible wait is given up: it never runs another instruction of the
  // agent's (a SIGKILLed process leaves the kernel only to exit), so only its slot, which
  // the kernel writes as it exits, is kept, and this thread takes a new one.
  const std::chrono::milliseconds limit = PreExecLimit();
  PreExecKill kill = PreExecKill::kNone;
  std::chrono::steady_clock::time_point killed_at;
  while (slot->running.load(std::memory_order_acquire) != 0) {
    const auto now = std::chrono::steady_clock::now();
    const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - started);
    std::chrono::milliseconds wait = kLook;
    if (kill == PreExecKill::kNone) {
      if (age >= limit) {
        kill = PreExecKill::kTooSlow;
      } else if (age >= kLook && ProcessState(pid) == 'T') {
        kill = PreExecKill::kStopped;
      } else {
        wait = std::min(kLook, limit - age);
      }
      if (kill != PreExecKill::kNone) {
        // Its group too (it may have made one and, exec'd in the instant before, started
        // another process in it): the pid is not reaped yet, so the group is its own.
        RawCall(SYS_kill, pid, SIGKILL);
        RawCall(SYS_kill, -pid, SIGKILL);
        killed_at = now;
        wait = std::chrono::milliseconds(1);
      }
    } else if (now - killed_at >= kKillGrace) {
      // Still there 0.2 s after SIGKILL: in an uninterruptible wait (state D), whatever
      // /proc says or cannot say (a SIGKILLed process leaves no other state so slowly).
      Abandoned::Get().Add(pid, std::move(slot), account);
      break;
    }
    WaitForRelease(*slot, kRunning, wait);
  }
  // A killed child is reaped here or given up, never left to the caller: once given up, the
  // task runner's reaper may reap it at any moment, and a later waitpid or kill by its pid
  // could reach another process that took the pid (attacker helper-83).
  if (kill != PreExecKill::kNone && slot) ReapOrAbandon(pid, account);
  if (killed != nullptr) *killed = kill;
  errno = 0;
  return pid;
}

void ReapOrAbandon(pid_t pid, uid_t account) {
  // A child that exited or was killed is a zombie within microseconds: looked at often at
  // first, then less, for ~0.2 s in all.
  std::chrono::microseconds nap{100};
  for (std::chrono::microseconds waited{0}; waited < kKillGrace; waited += nap) {
    const pid_t r = waitpid(pid, nullptr, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return;
    if (waited >= kKillGrace / 4 && ProcessState(pid) == 'D') break;
    std::this_thread::sleep_for(nap);
    nap = std::min<std::chrono::microseconds>(2 * nap, std::chrono::milliseconds(20));
  }
  Abandoned::Get().Add(pid, nullptr, account);
}

bool ReapIfAbandoned(pid_t pid) { return Abandoned::Get().ReapIf(pid); }

size_t AbandonedChildren() { return Abandoned::Get().Count(); }

size_t AbandonedChildrenOf(uid_t account) { return Abandoned::Get().CountOf(account); }

}  // namespace jc::nexec
