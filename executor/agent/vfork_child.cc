#include "executor/agent/vfork_child.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace jc::nexec {
namespace {

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

pid_t StartSharedMemoryChild(int (*child)(void*), void* arg, bool share_descriptors) {
  thread_local ChildStack stack;
  char* top = stack.Top();
  if (top == nullptr) return -1;
  // Every signal blocked across the clone: the child starts with this mask, and no handler
  // of the agent's may run in it before DefaultCaughtSignals.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  Trampoline trampoline{child, arg};
  const pid_t pid =
      clone(RunChild, top, CLONE_VM | CLONE_VFORK | (share_descriptors ? CLONE_FILES : 0) | SIGCHLD, &trampoline);
  const int err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  errno = err;
  return pid;
}

}  // namespace jc::nexec
