#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>

namespace jc::nexec {

// What became of a child of StartSharedMemoryChild that did not exec in time.
enum class PreExecKill {
  kNone,     // nothing: it exec'd or exited
  kStopped,  // killed: it was stopped (SIGSTOP, ^Z on its terminal) before it could exec
  kTooSlow,  // killed: it had not exec'd within PreExecLimit() (a hung file system)
};

// Starts `child(arg)` as a new process that shares the agent's memory until it execs or
// exits (clone with CLONE_VM, as posix_spawn does), and returns its pid once it has, or -1
// with errno set. The calling thread waits meanwhile; the agent's other threads run on.
//
// Why not fork: the agent is a large, threaded process, and fork copies its page tables
// only for exec to throw them away — at a few thousand tasks a second that copy and its
// teardown were most of the agent's CPU (perf, issue 32 item 6).
//
// The child runs with every signal blocked and every caught signal back at its default
// (so no agent handler ever runs on the shared memory; the kernel resets them as it makes
// the child where it can, clone3's CLONE_CLEAR_SIGHAND, else the child does); `child` may
// unblock them. Like a fork child of a threaded process it may make only async-signal-safe
// calls, and further: no allocation, no glibc call that coordinates threads (setuid and
// friends: use BecomeAccount, which makes the raw system calls), and it must end in execve
// or _exit.
//
// With `share_descriptors`, the child shares the agent's descriptor table too (no copy of
// it at clone), and must call UnshareLowDescriptors before it opens, closes or duplicates
// any descriptor.
//
// The wait is bounded, unlike a vfork parent's: the child holds the calling thread, which
// starts every account's tasks, and it is the account's once it became it. One stopped
// (SIGSTOP, ^Z on its terminal) is SIGKILLed at the next look (every ~50 ms), one still
// before exec after PreExecLimit() too, and `killed` says which. It is signalled only while
// it is not reaped, so no other process ever is; and a killed child is reaped before this
// returns, or, in an uninterruptible wait (a file system that never answers), given up to
// ReapIfAbandoned: the caller must neither wait for nor signal it (its pid may be another's
// by then).
//
// `account`: whose start it is (the uid the child becomes), counted against it if the child
// is given up (AbandonedChildrenOf).
inline constexpr uid_t kNoAccount = static_cast<uid_t>(-1);
pid_t StartSharedMemoryChild(int (*child)(void* arg), void* arg, bool share_descriptors = false,
                             PreExecKill* killed = nullptr, uid_t account = kNoAccount);

// How long a child may take from its start to exec before it is killed; 10 s unless set
// (the agent's --task_start_timeout).
void SetPreExecLimit(std::chrono::milliseconds limit);
std::chrono::milliseconds PreExecLimit();

// For a child that was killed or is exiting: reaps it if it ends within ~0.2 s, else gives
// it up to ReapIfAbandoned (it may be in an uninterruptible wait).
void ReapOrAbandon(pid_t pid, uid_t account = kNoAccount);
// Reaps `pid` if it is a given-up child that has ended: true then, so a reaper of every
// child knows the zombie was not a stranger's.
bool ReapIfAbandoned(pid_t pid);
// How many given-up children have not been reaped yet.
size_t AbandonedChildren();
// How many of them were starts for `account`. A child in an uninterruptible wait holds its
// slot, a process and, sharing the agent's memory or not, counts against no limit of the
// account's while its real uid is root (it acts as the account with its effective uid
// only), so the agent starts nothing more for an account that has kMaxAbandonedPerAccount
// of them (an account's file system that never answers, used over and over: attacker
// helper-85), until they end.
size_t AbandonedChildrenOf(uid_t account);
inline constexpr size_t kMaxAbandonedPerAccount = 8;

// Where the descriptors the agent keeps for its whole life go (KeepHigh): above every one a
// task's start opens, so a child copies only the low range. 0: nothing is moved (the open
// files limit is too low to split it).
int HighDescriptorBase();
// `fd` moved to HighDescriptorBase() or above (close-on-exec), or `fd` itself when there is
// no such range or no room in it.
int KeepHigh(int fd);
// For a child started with `share_descriptors`: a table of its own holding only the
// descriptors below `base` (close_range's CLOSE_RANGE_UNSHARE: the agent's long-lived ones
// are never copied, and nothing need close them at exec); a full copy when the kernel
// cannot. The table is sized for `base` slots: pass one more than the highest descriptor
// the child still needs, not HighDescriptorBase(). 0, or -1 with errno.
int UnshareLowDescriptors(int base);

// Resets every caught signal to its default; for the first step of such a child.
void DefaultCaughtSignals();
// false: children start through clone, their handlers reset by DefaultCaughtSignals, as on
// a kernel without clone3 (before 5.5) or behind a seccomp filter that refuses it (tests).
void UseClone3(bool use);
// Whether children start through clone3 (x86-64, until a kernel or filter refused it).
bool UsesClone3();

}  // namespace jc::nexec
