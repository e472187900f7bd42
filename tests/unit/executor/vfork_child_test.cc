// A task's child before exec shares the agent's memory (executor/agent/vfork_child.h): no
// handler of the agent's may run in it, so it starts with every caught signal back at its
// default — reset by the kernel as it makes the child (clone3's CLONE_CLEAR_SIGHAND), or by
// the child itself (clone, kernels before 5.5) — and an ignored signal stays ignored.

#include <signal.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <catch2/catch.hpp>

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
