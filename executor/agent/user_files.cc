#include "executor/agent/user_files.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "executor/agent/fuse_mounts.h"
#include "common/exec/close_descriptors.h"
#include "executor/agent/vfork_child.h"

namespace jc::nexec {
namespace {

// What the opening child sends back: errno (0: success), with the descriptor attached as
// SCM_RIGHTS when it succeeded.
void SendResult(int sock, int err, int fd) {
  msghdr msg{};
  iovec iov{&err, sizeof(err)};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (err == 0 && fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

// The child's answer: false when it sent none (it died first).
bool ReceiveResult(int sock, int* err, int* fd) {
  msghdr msg{};
  iovec iov{err, sizeof(*err)};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof(*err))) return false;
  *fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
  return *err != 0 || *fd >= 0;
}

absl::Status OpenError(const Account& account, const std::string& path, int err) {
  std::string message = absl::StrCat("cannot open ", path, " as ", account.name, ": ", OpenErrorText(err));
  if (err == kOnFuseOfAnAccount || err == kOnUnlistedMount) return absl::PermissionDeniedError(message);
  if (err == kThroughDescriptor || err == kInProc) return absl::InvalidArgumentError(message);
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EISDIR:
    case ELOOP:
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace

std::string OpenErrorText(int err) {
  if (err == kOnFuseOfAnAccount) {
    return "it lies on a FUSE file system an account mounted, which the agent does not touch (its daemon could "
           "hold the agent's threads for ever); use a directory of a file system root mounted";
  }
  if (err == kOnUnlistedMount) {
    return "it lies on a mount the agent's mount table does not list (another mount namespace's?), which the "
           "agent does not touch";
  }
  if (err == kInProc) {
    return "it lies in /proc, which holds processes, not a task's files; name a file";
  }
  if (err == kThroughDescriptor) {
    return "it names a process's open descriptor or directory through /proc (/dev/stdout, /dev/stderr, /dev/fd/N, "
           "/proc/PID/fd/N, /proc/PID/cwd), not a file; name a file (errors go with the output when no error file "
           "is given)";
  }
  return std::strerror(err);
}

OwnedFd& OwnedFd::operator=(OwnedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

OwnedFd::~OwnedFd() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<Account> LookupAccount(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* out = nullptr;
  int rc = name.empty() ? getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &out)
                        : getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &out);
  if (rc != 0 || out == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no such user \"", name, "\" on this host"));
  }
  Account a;
  a.uid = pw.pw_uid;
  a.gid = pw.pw_gid;
  a.name = pw.pw_name;
  a.home = pw.pw_dir ? pw.pw_dir : "/";
  a.shell = pw.pw_shell ? pw.pw_shell : "/bin/sh";
  // The groups initgroups would give it, looked up now: NSS may not run after a fork.
  int count = 32;
  a.groups.resize(static_cast<size_t>(count));
  while (getgrouplist(a.name.c_str(), a.gid, a.groups.data(), &count) < 0) {
    a.groups.resize(static_cast<size_t>(count) + 32);
    count = static_cast<int>(a.groups.size());
  }
  a.groups.resize(static_cast<size_t>(count));
  return a;
}

absl::StatusOr<Account> AccountCache::Lookup(const std::string& name) {
  const absl::Time now = absl::Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end() && it->second.expires > now) return it->second.account;
  }
  auto account = LookupAccount(name);
  if (!account.ok()) return account;
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() > 4096) entries_.clear();  // bounded: many users each seen once
  entries_[name] = Entry{*account, now + ttl_};
  return account;
}

bool ActsForOthers(const Account& account) { return geteuid() == 0 && account.uid != 0; }

absl::Status CheckMayActFor(const Account& account) {
  if (geteuid() == 0 || account.uid == geteuid()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("the agent does not run as root, so it cannot run tasks as ", account.name,
                   " nor open files as that account"));
}

int BecomeAccount(const Account& account) {
  // The system calls themselves, not glibc's wrappers: those make every thread of the
  // process change with the caller, which a child sharing the agent's memory
  // (vfork_child.h) must not attempt — it would signal the agent's threads.
  if (syscall(SYS_setgroups, account.groups.size(), account.groups.data()) != 0) return -1;
  if (syscall(SYS_setresgid, account.gid, account.gid, account.gid) != 0) return -1;
  if (syscall(SYS_setresuid, account.uid, account.uid, account.uid) != 0) return -1;
  return 0;
}

int ActAsAccount(const Account& account) {
  if (syscall(SYS_setgroups, account.groups.size(), account.groups.data()) != 0) return -1;
  if (syscall(SYS_setresgid, account.gid, account.gid, account.gid) != 0) return -1;
  return static_cast<int>(syscall(SYS_setresuid, static_cast<uid_t>(-1), account.uid, static_cast<uid_t>(-1)));
}

int FinishBecomingAccount(const Account& account) {
  return static_cast<int>(syscall(SYS_setresuid, account.uid, account.uid, account.uid));
}

absl::Status CheckNoStuckStarts(const Account& account) {
  if (account.uid == 0) return absl::OkStatus();
  const size_t stuck = AbandonedChildrenOf(account.uid);
  if (stuck < kMaxAbandonedPerAccount) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      stuck, " earlier starts for ", account.name,
      " were killed and still wait in the kernel on a file system that does not answer; nothing more starts for ",
      account.name, " on this host until they end"));
}

int MakeParentDirectories(char* path) {
  char* last = std::strrchr(path, '/');
  if (last == nullptr || last == path) return 0;
  for (char* p = path + 1; p < last; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    const int rc = mkdir(path, 0755);
    const int err = errno;
    *p = '/';
    if (rc != 0 && err != EEXIST) {
      errno = err;
      return -1;
    }
  }
  *last = '\0';
  const int rc = mkdir(path, 0755);
  const int err = errno;
  *last = '/';
  if (rc != 0 && err != EEXIST) {
    errno = err;
    return -1;
  }
  return 0;
}

// The error for an O_PATH descriptor `located` that lies on a FUSE file system an account
// mounted (kOnFuseOfAnAccount), in a proc file system (kInProc), or that could not be looked
// at (its errno); 0 for one that may be opened. A file system on a block device (ext4, xfs;
// major number not 0) is neither FUSE an account can make (fuseblk needs root) nor proc, told
// by statx without a request to any file system (AT_STATX_DONT_SYNC: FUSE answers from its
// cache); only the rest (tmpfs, NFS, overlay, FUSE, proc) costs the look at the kernel's
// mount table, which asks no file system either.
int RefusalFor(int located) {
  struct statx where {};
  if (syscall(SYS_statx, located, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, 0, &where) == 0 &&
      where.stx_dev_major != 0) {
    return 0;
  }
  MountInfoScan::Verdict verdict;
  if (MountVerdictOf(located, &verdict) != 0) {
    if (errno == ESTALE) return kOnUnlistedMount;
    return errno != 0 ? errno : EIO;
  }
  if (verdict == MountInfoScan::Verdict::kFuseOfAccount) return kOnFuseOfAnAccount;
  if (verdict == MountInfoScan::Verdict::kProc) return kInProc;
  return 0;
}

namespace {

// "/proc/self/fd/N" for `fd`, at `out` (room for 40 characters).
void SelfFdPath(char* out, int fd) {
  static constexpr char kPrefix[] = "/proc/self/fd/";
  std::memcpy(out, kPrefix, sizeof kPrefix - 1);
  *AppendDecimal(out + sizeof kPrefix - 1, fd) = '\0';
}

// What the kernel answers an open with O_CREAT of an existing file `located` found in the
// directory `parent` (fs.protected_regular and protected_fifos at the host's levels): EACCES
// for a regular file or FIFO of another's, neither the opener's nor the directory's owner's,
// in a sticky directory everyone (level 1, as systemd sets it), or its group (level 2), may
// write; 0 otherwise. The file is opened through its
// descriptor, which the kernel's own check does not see (it applies to an open by path with
// O_CREAT only; reviewer, session 82). By the kernel's cached view: no request to any file
// system.
// fs.protected_regular and fs.protected_fifos as the host set them when the agent started
// (0: off; 1: sticky directories everyone may write; 2: those the group may write too).
int ProtectedLevel(const char* file) {
  std::ifstream in(file);
  int level = 0;
  return (in >> level) ? level : 0;
}
const int protected_regular = ProtectedLevel("/proc/sys/fs/protected_regular");
const int protected_fifos = ProtectedLevel("/proc/sys/fs/protected_fifos");

int StickyRefusal(int located, int parent) {
  struct statx file {}, dir {};
  if (syscall(SYS_statx, located, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_UID, &file) != 0 ||
      syscall(SYS_statx, parent, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MODE | STATX_UID, &dir) != 0) {
    return errno;
  }
  const int level = S_ISREG(file.stx_mode) ? protected_regular : S_ISFIFO(file.stx_mode) ? protected_fifos : 0;
  const mode_t shared = level >= 2 ? (S_IWOTH | S_IWGRP) : level == 1 ? S_IWOTH : 0;
  if ((dir.stx_mode & S_ISVTX) == 0 || (dir.stx_mode & shared) == 0) return 0;
  if (file.stx_uid == geteuid() || file.stx_uid == dir.stx_uid) return 0;
  return EACCES;
}

// `name` from `dir` (AT_FDCWD: a path), O_PATH with `flags`, without following a link into a
// process's descriptors (openat2's RESOLVE_NO_MAGICLINKS): one found is refused with
// kThroughDescriptor, told from a loop of ordinary links (ELOOP too) by a second look that may
// follow it (O_PATH: nothing is opened, no file system asked). Before Linux 5.6 (no openat2)
// as openat. -1 with errno set. Async-signal-safe.
int LocateNoDescriptorLink(int dir, const char* name, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(O_PATH | O_CLOEXEC | flags);
  how.resolve = RESOLVE_NO_MAGICLINKS;
  const long fd = syscall(SYS_openat2, dir, name, &how, sizeof how);
  if (fd >= 0) return static_cast<int>(fd);
  if (errno == ENOSYS) return openat(dir, name, O_PATH | O_CLOEXEC | flags);
  if (errno != ELOOP) return -1;
  const int followed = openat(dir, name, O_PATH | O_CLOEXEC | flags);
  if (followed < 0) return -1;  // ELOOP: a loop of links
  close(followed);
  errno = kThroughDescriptor;
  return -1;
}

}  // namespace

int OpenUnlessOnFuseOfAnAccount(const char* path, char* walk, int flags, mode_t mode) {
  // The path is walked once: its directory, kept, then the name in it. A second walk could be
  // answered otherwise (a link on an account's file system that reads one way, then another;
  // a file swapped with a mount on it: attacker helper-88), so every later step starts from
  // a descriptor already held.
  char* slash = std::strrchr(walk, '/');
  const char* name = slash == nullptr ? walk : slash + 1;
  int parent;
  if (slash == nullptr) {
    parent = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  } else if (slash == walk) {
    parent = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  } else {
    *slash = '\0';
    parent = LocateNoDescriptorLink(AT_FDCWD, walk, O_DIRECTORY);
    *slash = '/';
  }
  if (parent < 0) return -1;
  if (*name == '\0' && slash != nullptr) name = ".";  // "dir/": the directory itself ("" stays ENOENT)
  int fd = -1, err = ELOOP;  // there and not there, round after round: a dangling link
  // A few rounds: a file created meanwhile by someone else (EEXIST below) is then opened as
  // an existing one, and looked at first.
  for (int round = 0; round < 4; ++round) {
    const int located = LocateNoDescriptorLink(parent, name, flags & O_NOFOLLOW);
    if (located >= 0) {
      err = RefusalFor(located);
      if (err == 0 && (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) err = EEXIST;
      if (err == 0 && (flags & O_CREAT) != 0) err = StickyRefusal(located, parent);
      if (err == 0) {
        // Opened through the descriptor looked at: the file checked is the file opened.
        char self[48];
        SelfFdPath(self, located);
        fd = open(self, flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW), mode);
        if (fd < 0) err = errno;
      }
      close(located);
      break;
    }
    err = errno;
    if (err != ENOENT || (flags & O_CREAT) == 0) break;
    // Missing: created in its directory, looked at first, and exclusively: a name that is
    // there after all (a mount point on a file, a link) is never opened from here, but
    // looked at as an existing file in the next round (attacker helper-86).
    err = RefusalFor(parent);
    if (err != 0) break;
    fd = openat(parent, name, flags | O_EXCL | O_NOFOLLOW, mode);
    if (fd >= 0) break;
    err = errno;
    if (err != EEXIST || (flags & O_EXCL) != 0) break;
    err = ELOOP;
  }
  close(parent);
  if (fd < 0) errno = err;
  return fd;
}

namespace {

// Runs `open_fn` in a child that became `account` and hands its descriptor back: what the
// account itself may open, opened by the account, whatever the agent may. `open_fn` runs
// after fork in a threaded process, so it makes only async-signal-safe calls and returns a
// descriptor, or -1 with errno set.
// The open-as-account helpers running now, per account. With the account's given-up
// children they are at most kMaxAbandonedPerAccount: helpers started side by side (parallel
// `nexec logs` calls) would each be given up at their timeout together, past the cap
// (reviewer, session 82).
class HelpersInFlight {
 public:
  static HelpersInFlight& Get() {
    static HelpersInFlight* const helpers = new HelpersInFlight;
    return *helpers;
  }
  absl::Status Reserve(const Account& account) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t stuck = AbandonedChildrenOf(account.uid);
    int& running = running_[account.uid];
    if (stuck + static_cast<size_t>(running) >= kMaxAbandonedPerAccount) {
      if (running == 0) running_.erase(account.uid);
      return absl::ResourceExhaustedError(absl::StrCat(
          running, " opens of ", account.name, "'s files are still waiting and ", stuck,
          " more were given up in the kernel (a file system that does not answer?); no more until they end"));
    }
    ++running;
    return absl::OkStatus();
  }
  void Release(uid_t uid) {
    std::lock_guard<std::mutex> lock(mu_);
    if (--running_[uid] <= 0) running_.erase(uid);
  }

 private:
  std::mutex mu_;
  std::map<uid_t, int> running_;
};

template <typename OpenFn>
absl::StatusOr<OwnedFd> OpenInChildAs(const Account& account, const std::string& path, OpenFn open_fn) {
  JC_RETURN_IF_ERROR(HelpersInFlight::Get().Reserve(account));
  absl::Cleanup release = [&] { HelpersInFlight::Get().Release(account.uid); };
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(sv[0]);
    close(sv[1]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here: the agent has threads.
    // The agent's descriptors go first, all but the answer's socket: a helper the kernel
    // holds (given up, ReapOrAbandon) kept them for as long, the agent's listening socket
    // among them, into the agent's next life (reviewer, session 82).
    CloseDescriptorsBut(&sv[1], 1);
    int err = 0, fd = -1;
    // Only the effective uid the account's (with its groups and gid): files are opened
    // as the account's own shell would, while the real and saved uid stay root, so the
    // account can neither signal nor stop the helper, and FUSE lets it into no file
    // system the account mounted (a FUSE mount serves its mounter only when all three uids
    // are the mounter's): the agent is handed nothing there (fuse_mounts.h).
    // A non-root agent's helper is the account already (it may run no other's tasks).
    if (geteuid() == 0 && ActAsAccount(account) != 0) {
      err = errno;
    } else if ((fd = open_fn()) < 0) {
      err = errno;
    }
    SendResult(sv[1], err, fd);
    _exit(0);
  }
  close(sv[1]);
  int err = 0, fd = -1;
  // Bounded: the account chooses what it names, and an open can wait for ever (a FIFO
  // nobody opens from the other end: attacker helper-59 stalled an agent's launches so).
  // No longer than a task's start may wait on the account's files (--task_start_timeout).
  const absl::Duration timeout = std::min(kOpenAsTimeout, absl::FromChrono(PreExecLimit()));
  pollfd ready{sv[0], POLLIN, 0};
  int polled;
  while ((polled = poll(&ready, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)))) < 0 && errno == EINTR) {
  }
  const bool answered = polled > 0 && ReceiveResult(sv[0], &err, &fd);
  close(sv[0]);
  if (polled == 0) kill(pid, SIGKILL);
  // Not a blocking wait: a killed open, or the helper's exit closing what it opened (a
  // flush), can be an uninterruptible wait on a file system that never answers (a FUSE
  // daemon of the account's: attacker helper-82).
  ReapOrAbandon(pid, account.uid);
  if (polled == 0) {
    return absl::DeadlineExceededError(absl::StrCat("cannot open ", path, " as ", account.name, ": it did not open within ",
                                                    absl::FormatDuration(timeout),
                                                    " (a FIFO nobody reads, or a file system that hangs?)"));
  }
  if (!answered) return absl::InternalError(absl::StrCat("cannot open ", path, " as ", account.name, ": the helper died"));
  if (err != 0) return OpenError(account, path, err);
  return OwnedFd(fd);
}

}  // namespace

absl::StatusOr<OwnedFd> OpenAs(const Account& account, const std::string& path, int flags, mode_t mode,
                               bool make_parents, OwnAccountOpen own) {
  JC_RETURN_IF_ERROR(CheckMayActFor(account));
  flags |= O_CLOEXEC;
  std::string walk = path;  // MakeParentDirectories' buffer, made before any fork
  // A root agent opens root's own files through the helper too: a walk of a path through a
  // directory on an account's file system can wait for ever, and only a helper's wait is
  // bounded (attacker helper-88: root's job, its output's directory an account's). So does a
  // non-root agent its own account's (helper-93), but where the caller's wait holds only
  // itself and it opens often (`nexec logs`, whose followers poll): a helper per open there
  // put every follower under the account's cap of helpers (reviewer helper-94). A task's
  // ordinary output files never come here: the task's child opens them.
  if (geteuid() != 0 && own == OwnAccountOpen::kInCallingThread) {
    if (make_parents && MakeParentDirectories(walk.data()) != 0) return OpenError(account, path, errno);
    int fd = OpenUnlessOnFuseOfAnAccount(path.c_str(), walk.data(), flags, mode);
    if (fd < 0) return OpenError(account, path, errno);
    return OwnedFd(fd);
  }
  return OpenInChildAs(account, path, [&]() -> int {
    if (make_parents && MakeParentDirectories(walk.data()) != 0) return -1;
    return OpenUnlessOnFuseOfAnAccount(path.c_str(), walk.data(), flags, mode);
  });
}

namespace {

// The directory at `path`, O_PATH, no magic link followed; -1 with errno set. Async-signal-safe.
int OpenDirectoryNoMagic(const char* path) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  const long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
  // Before Linux 5.6: no /proc path at all.
  if (std::strncmp(path, "/proc/", 6) == 0) {
    errno = ELOOP;
    return -1;
  }
  return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

}  // namespace

absl::StatusOr<OwnedFd> OpenDirectoryAs(const Account& account, const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("\"", path, "\" is not an absolute path"));
  }
  JC_RETURN_IF_ERROR(CheckMayActFor(account));
  // As OpenAs: through the helper, root's own and a non-root agent's own account's too.
  return OpenInChildAs(account, path, [&]() -> int {
    const int fd = OpenDirectoryNoMagic(path.c_str());
    if (fd < 0) return -1;
    int err = RefusalFor(fd);
    if (err == 0 && fchdir(fd) != 0) err = errno;  // it may enter it
    if (err == 0) return fd;
    close(fd);
    errno = err;
    return -1;
  });
}

absl::StatusOr<OwnedFd> OpenInTrustedDirectory(const std::string& trusted_root, const std::string& name,
                                               const Account& account, int flags, mode_t mode) {
  if (trusted_root.empty() || trusted_root.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("the output directory \"", trusted_root, "\" is not an absolute path"));
  }
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" does not name a file in ", trusted_root));
  }
  if (mkdir(trusted_root.c_str(), 0755) != 0 && errno == ENOENT) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(trusted_root).parent_path(), ec);
    (void)mkdir(trusted_root.c_str(), 0755);
  }
  OwnedFd dir(open(trusted_root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    return absl::FailedPreconditionError(absl::StrCat("cannot open the output directory ", trusted_root, ": ",
                                                      std::strerror(errno), " (a symlink is refused)"));
  }
  struct stat st{};
  if (fstat(dir.get(), &st) != 0) {
    return absl::InternalError(absl::StrCat("fstat ", trusted_root, ": ", std::strerror(errno)));
  }
  if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the output directory %s is not safe to open users' files in: it belongs to uid %d with mode %04o, and "
        "must belong to root or the agent's account and be writable by its owner only",
        trusted_root, st.st_uid, st.st_mode & 07777));
  }
  const std::string path = absl::StrCat(trusted_root, "/", name);
  OwnedFd fd(openat(dir.get(), name.c_str(), flags | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode));
  if (!fd) return OpenError(account, path, errno);
  if (fstat(fd.get(), &st) != 0) return absl::InternalError(absl::StrCat("fstat ", path, ": ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  if (st.st_uid == account.uid) return fd;
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " belongs to uid ", st.st_uid, ", not to ", account.name, " (uid ", account.uid, ")"));
  }
  if (ActsForOthers(account) && (flags & O_CREAT) != 0 && fchown(fd.get(), account.uid, account.gid) != 0) {
    return absl::InternalError(absl::StrCat("cannot give ", path, " to ", account.name, ": ", std::strerror(errno)));
  }
  return fd;
}

bool InTrustedDirectory(const std::string& path, const std::string& trusted_root) {
  const auto slash = path.rfind('/');
  return !trusted_root.empty() && slash == trusted_root.size() && path.compare(0, slash, trusted_root) == 0;
}

absl::StatusOr<OwnedFd> OpenTaskFile(const Account& account, const std::string& path, int flags, mode_t mode,
                                     const std::string& trusted_root, OwnAccountOpen own) {
  // A non-root agent's output directory is its own account's, which that account may mount
  // a file system on that never answers: opened as any path of the account's (attacker
  // helper-95), in the bounded helper unless `own` says otherwise.
  if (geteuid() == 0 && InTrustedDirectory(path, trusted_root)) {
    return OpenInTrustedDirectory(trusted_root, path.substr(trusted_root.size() + 1), account, flags, mode);
  }
  return OpenAs(account, path, flags, mode, /*make_parents=*/(flags & O_CREAT) != 0, own);
}

absl::StatusOr<OwnedFd> OpenTaskFileWithoutWaiting(const Account& account, const std::string& path, int flags,
                                                   mode_t mode, const std::string& trusted_root) {
  JC_ASSIGN_OR_RETURN(OwnedFd fd, OpenTaskFile(account, path, flags | O_NONBLOCK, mode, trusted_root));
  const int now = fcntl(fd.get(), F_GETFL);
  if (now < 0 || fcntl(fd.get(), F_SETFL, now & ~O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  return fd;
}

absl::StatusOr<OwnedFd> OpenRegularTaskFile(const Account& account, const std::string& path, int flags, mode_t mode,
                                            const std::string& trusted_root) {
  JC_ASSIGN_OR_RETURN(OwnedFd fd, OpenTaskFileWithoutWaiting(account, path, flags, mode, trusted_root));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  return fd;
}

}  // namespace jc::nexec
