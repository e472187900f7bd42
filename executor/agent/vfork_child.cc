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
#include <cstdint>

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

void UseClone3(bool use) { clone3_works.store(use, std::memory_order_relaxed); }

bool UsesClone3() {
#if defined(__x86_64__)
  return clone3_works.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

pid_t StartSharedMemoryChild(int (*child)(void*), void* arg, bool share_descriptors) {
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
    args.flags = CLONE_VM | CLONE_VFORK | CLONE_CLEAR_SIGHAND | (share_descriptors ? CLONE_FILES : 0);
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
  pid = clone(RunChild, top, CLONE_VM | CLONE_VFORK | (share_descriptors ? CLONE_FILES : 0) | SIGCHLD, &trampoline);
  err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  errno = err;
  return pid;
}

}  // namespace jc::nexec
