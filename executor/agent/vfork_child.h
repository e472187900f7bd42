#pragma once

#include <sys/types.h>

namespace jc::nexec {

// Starts `child(arg)` as a new process that shares the agent's memory until it execs or
// exits (clone with CLONE_VM | CLONE_VFORK, as posix_spawn does), and returns its pid, or
// -1 with errno set. The calling thread waits meanwhile; the agent's other threads run on.
//
// Why not fork: the agent is a large, threaded process, and fork copies its page tables
// only for exec to throw them away — at a few thousand tasks a second that copy and its
// teardown were most of the agent's CPU (perf, issue 32 item 6).
//
// The child runs with every signal blocked and every caught signal back at its default
// (so no agent handler ever runs on the shared memory); `child` may unblock them. Like a
// fork child of a threaded process it may make only async-signal-safe calls, and further:
// no allocation, no glibc call that coordinates threads (setuid and friends: use
// BecomeAccount, which makes the raw system calls), and it must end in execve or _exit.
pid_t StartSharedMemoryChild(int (*child)(void* arg), void* arg);

// Resets every caught signal to its default; for the first step of such a child.
void DefaultCaughtSignals();

}  // namespace jc::nexec
