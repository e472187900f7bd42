#pragma once

// Files a task's user controls, opened as that user (issue 29: a root daemon never opens,
// creates, reads or removes a path a user controls except as that user).
//
// The agent runs as root so that it can start tasks as their users. Every path a job names
// (its -o/-e files, their directories, the MPI hostfile, an elastic job's event file) is
// under the user's control: a symlink planted there would otherwise make root append to
// /etc/passwd, truncate a root file or read a root-only file back through `nexec logs`.
// So those paths are opened by a short-lived child that took the user's uid, gid and
// groups first, and the open descriptor comes back to the agent over a socket
// (SCM_RIGHTS). The kernel then checks each access as it would for the user's own shell.
//
// The one place root opens files for users itself is the master's default output
// directory (its --log_dir), which no user can write: there it creates and opens files with
// *at calls relative to a descriptor of that directory, never following a symlink, and
// hands what it creates to the job's user. Users need not be able to reach that directory;
// they read their output through `nexec logs`.

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace jc::nexec {

// An account of this host with everything a child needs to become it, resolved before a
// fork (after one, a threaded process may call only async-signal-safe functions).
struct Account {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
  std::string home;
  std::string shell;
  std::vector<gid_t> groups;  // supplementary groups, as initgroups would set them
};

// The account named `name` ("" = this process's own); InvalidArgument naming it when the
// host has no such user.
absl::StatusOr<Account> LookupAccount(const std::string& name);

// LookupAccount's answers kept for `ttl`, as slurmd keeps its group cache: looking up an
// account (passwd, then the group database for its groups) cost as much as the rest of
// starting a task. An account removed or regrouped is seen within `ttl`; an unknown name
// is looked up each time (it may appear any moment).
class AccountCache {
 public:
  explicit AccountCache(absl::Duration ttl = absl::Seconds(10)) : ttl_(ttl) {}
  absl::StatusOr<Account> Lookup(const std::string& name);

 private:
  struct Entry {
    Account account;
    absl::Time expires;
  };
  const absl::Duration ttl_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

// Whether this process must become `account` to touch its files: it runs as root and the
// account is not root.
bool ActsForOthers(const Account& account);
// OK when this agent may act for `account`: a root agent for every account, one that runs as
// an account for that account alone (PermissionDenied, saying so, for another: nothing of
// another's, not even its files, is touched as the agent's own account; attacker helper-95).
absl::Status CheckMayActFor(const Account& account);

// Becomes `account` (supplementary groups, gid, then uid). Async-signal-safe: for a child
// between fork and exec. Returns 0, or -1 with errno set.
int BecomeAccount(const Account& account);

// BecomeAccount in two steps, for a child that holds its agent's launching thread until it
// execs (vfork_child.h). ActAsAccount: the account's groups, gid and effective uid (every
// file is opened, every directory entered as the account's own), while the real and saved
// uid stay root, so the account can neither signal nor trace the child yet (kill needs a
// real or effective uid of the sender to match the target's real or saved one). Then,
// just before exec, FinishBecomingAccount: the real and saved uid too. Async-signal-safe,
// raw system calls; 0, or -1 with errno set.
int ActAsAccount(const Account& account);
int FinishBecomingAccount(const Account& account);

// FailedPrecondition, saying why, when kMaxAbandonedPerAccount children started for
// `account` (a task's start, an open as the account) were killed and still wait in the
// kernel (vfork_child.h: a file system that never answers); the agent starts nothing more
// for the account until they end. OK otherwise, and always for root.
absl::Status CheckNoStuckStarts(const Account& account);

// Creates every missing directory above the file `path` (mode 0755 before the umask), as
// mkdir -p would, in place: `path` is modified while walking and restored. Async-signal-safe.
// Returns 0, or -1 with errno set by the mkdir that failed.
int MakeParentDirectories(char* path);

// What OpenUnlessOnFuseOfAnAccount sets errno to for a file on a FUSE file system an account
// mounted (fuse_mounts.h), for one on a mount this process's mount table does not list
// (another mount namespace's, reached through /proc/PID/root), and for a path through a
// process's open descriptor (/dev/stdout, /dev/fd/N, /proc/PID/fd/N: no file of its own; in
// the child that opens it, the /dev/null it holds, so a task's output went nowhere without a
// word: attacker helper-93), and for a file in /proc (/proc/self/mem, opened by a task's
// child that shares the agent's memory, was the agent's memory: attacker helper-95); no errno
// has these values.
inline constexpr int kOnFuseOfAnAccount = 1 << 20;
inline constexpr int kOnUnlistedMount = (1 << 20) + 1;
inline constexpr int kThroughDescriptor = (1 << 20) + 2;
inline constexpr int kInProc = (1 << 20) + 3;

// 0 when the O_PATH descriptor `located` lies on no FUSE file system an account mounted and
// not in /proc; kOnFuseOfAnAccount or kInProc where it does, kOnUnlistedMount on a mount this
// process's table does not list, or the errno of a look that failed. Sends no request to any file system (statx from
// the cache, the kernel's mount table): a walk checks each step with it before it looks at
// what the step found (attributes, a link's target). Async-signal-safe.
int RefusalFor(int located);

// open(2) of `path`, unless it lies on a FUSE file system an account mounted (errno
// kOnFuseOfAnAccount then), names a process's descriptor (kThroughDescriptor; not on
// kernels before 5.6, which have no openat2) or lies in /proc (kInProc). The path is walked once: its directory, opened O_PATH and kept,
// then the name in it, O_PATH too (nothing opened, nothing to flush); that descriptor's mount
// is checked, and the file is opened through it (/proc/self/fd), so the file checked is the
// file opened. With O_CREAT the kernel's rule for another's file in a sticky directory
// everyone may write is applied here (fs.protected_regular; the kernel's own applies to an
// open by path only). A missing file (with O_CREAT) is created in its directory, checked
// first, exclusively and without following a link at its name: one there after all — a
// mount point on a file, a link — is looked at as an existing file instead, so a link to a
// file that does not exist is not followed to create it (ELOOP). `walk` is a copy of `path`
// to write in. For the open-as-account helper and a task's child: async-signal-safe, no
// allocation; a descriptor, or -1 with errno set.
int OpenUnlessOnFuseOfAnAccount(const char* path, char* walk, int flags, mode_t mode);

// strerror(err), or what kOnFuseOfAnAccount, kOnUnlistedMount, kThroughDescriptor or kInProc means.
std::string OpenErrorText(int err);

// A descriptor that closes itself.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.release()) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd();
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Where a non-root agent (which runs as the one account whose tasks it runs) opens that
// account's files: in a helper whose wait is bounded (kBounded: a file system of the
// account's that never answers then holds a launch for kOpenAsTimeout at most, not the
// thread that starts every task), or in the calling thread (kInCallingThread: for a caller
// whose wait holds only itself and which opens often, a `nexec logs` call, whose followers
// would otherwise each count against the account's cap of helpers). A root agent always
// opens through the helper.
enum class OwnAccountOpen { kBounded, kInCallingThread };

// open(2) of `path` as `account` (O_CLOEXEC added) in a child that is the account (one that
// became it, for a root agent: root's own files too), whose wait is bounded by
// kOpenAsTimeout; a non-root agent's in the calling thread where `own` says so. With
// `make_parents` the missing directories above the file are created first, also as the
// account. Errors name the path, the account and the reason, as the user's shell would
// meet it ("cannot open /etc/shadow as alice: Permission denied").
absl::StatusOr<OwnedFd> OpenAs(const Account& account, const std::string& path, int flags, mode_t mode,
                               bool make_parents = false, OwnAccountOpen own = OwnAccountOpen::kBounded);
// How long an open as another account may take at most (DEADLINE_EXCEEDED after, its helper
// killed); no longer than a task's start may take (vfork_child.h's PreExecLimit) either.
inline constexpr absl::Duration kOpenAsTimeout = absl::Seconds(20);

// A directory the account names for root to bind into its container (its working
// directory, a dataset; issue 44): opened O_PATH as `account` (in a child that became it,
// as OpenAs), which must be able to enter it (search permission: the child fchdirs to it).
// Symlinks are followed as the account, so they lead only where it may go itself; magic
// links (/proc/*/fd/*, /proc/*/root) are refused (openat2 RESOLVE_NO_MAGICLINKS): the
// child holds the agent's descriptors until it exits. What is bound from the descriptor
// (task_runner.cc: cloned with open_tree, attached in the task's mount namespace) is this
// directory, whatever is renamed or swapped at `path` afterwards.
absl::StatusOr<OwnedFd> OpenDirectoryAs(const Account& account, const std::string& path);

// Opens `name` in the directory `trusted_root` (the master's default output directory)
// for `account` without becoming it (a root agent's; OpenTaskFile): the directory must be a real directory (not a
// symlink) that belongs to root or this process and that only its owner may write, so no
// user can have planted a link or a file in it. `name` is opened relative to a descriptor
// of that directory with O_NOFOLLOW; a file this creates is handed to `account`. An
// existing file must be a regular file of `account` or of this process. `trusted_root` is
// created (0755) when missing.
absl::StatusOr<OwnedFd> OpenInTrustedDirectory(const std::string& trusted_root, const std::string& name,
                                               const Account& account, int flags, mode_t mode);

// Whether `path` lies directly in `trusted_root` (non-empty).
bool InTrustedDirectory(const std::string& path, const std::string& trusted_root);

// A task's file: opened in `trusted_root` (OpenInTrustedDirectory) when `path` lies
// directly in it and this agent is root (a non-root agent's output directory is its
// account's own, which that account may mount on: opened as any of its paths), otherwise as
// the account (OpenAs, creating missing directories when `flags` has O_CREAT).
absl::StatusOr<OwnedFd> OpenTaskFile(const Account& account, const std::string& path, int flags, mode_t mode,
                                     const std::string& trusted_root,
                                     OwnAccountOpen own = OwnAccountOpen::kBounded);

// OpenTaskFile without waiting (a FIFO no one reads would hold the thread that starts every
// account's tasks: refused, ENXIO), then made blocking as a task's output is.
absl::StatusOr<OwnedFd> OpenTaskFileWithoutWaiting(const Account& account, const std::string& path, int flags,
                                                   mode_t mode, const std::string& trusted_root);

// OpenTaskFileWithoutWaiting, for a file the agent itself then writes (a hostfile, an
// elastic job's event file): a regular file only, made blocking again. A FIFO or device the
// account names could hold the agent's thread in the write for as long as it liked
// (attacker helper-83: a FIFO it kept full held every launch on the host); InvalidArgument.
absl::StatusOr<OwnedFd> OpenRegularTaskFile(const Account& account, const std::string& path, int flags, mode_t mode,
                                            const std::string& trusted_root);

}  // namespace jc::nexec
