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
  void* stack = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  (void)mprotect(stack, kGuardBytes, PROT_NONE);
  // Every signal blocked across the clone: the child starts with this mask, and no handler
  // of the agent's may run in it before DefaultCaughtSignals.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  Trampoline trampoline{child, arg};
  char* top = static_cast<char*>(stack) + kStackBytes + kGuardBytes;
  const pid_t pid = clone(RunChild, top, CLONE_VM | CLONE_VFORK | SIGCHLD, &trampoline);
  const int err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  munmap(stack, kStackBytes + kGuardBytes);  // the child has exec'd or exited: CLONE_VFORK
  errno = err;
  return pid;
}

}  // namespace jc::nexec
