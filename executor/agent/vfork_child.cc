#include "executor/agent/vfork_child.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

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

pid_t StartSharedMemoryChild(int (*child)(void*), void* arg) {
  thread_local ChildStack stack;
  char* top = stack.Top();
  if (top == nullptr) return -1;
  // Every signal blocked across the clone: the child starts with this mask, and no handler
  // of the agent's may run in it before DefaultCaughtSignals.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  Trampoline trampoline{child, arg};
  const pid_t pid = clone(RunChild, top, CLONE_VM | CLONE_VFORK | SIGCHLD, &trampoline);
  const int err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  errno = err;
  return pid;
}

}  // namespace jc::nexec
