#include "adapters/sdk/tree_at.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "adapters/sdk/copy_as.h"

namespace jc::adapter {
namespace {

// Deeper trees are refused rather than followed: each level holds two descriptors.
constexpr int kMaxDepth = 200;

std::string Errno(int err) { return std::strerror(err); }

// The names in the directory `fd` (without "." and ".."), read through a descriptor of
// its own so that `fd` stays usable.
absl::StatusOr<std::vector<std::string>> Names(int fd) {
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return absl::UnavailableError(absl::StrCat("dup: ", Errno(errno)));
  DIR* d = fdopendir(copy);
  if (d == nullptr) {
    const int err = errno;
    close(copy);
    return absl::UnavailableError(absl::StrCat("fdopendir: ", Errno(err)));
  }
  rewinddir(d);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    errno = 0;
  }
  const int err = errno;
  closedir(d);
  if (err != 0) return absl::UnavailableError(absl::StrCat("readdir: ", Errno(err)));
  return names;
}

absl::Status CopyBytes(int in, int out, const std::string& name) {
  bool plain = false;  // copy_file_range refused: read and write
  std::vector<char> buf;
  while (true) {
    ssize_t n;
    if (!plain) {
      n = copy_file_range(in, nullptr, out, nullptr, size_t{1} << 30, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP || errno == EBADF)) {
        plain = true;
        buf.resize(1 << 20);
        continue;
      }
    } else {
      n = read(in, buf.data(), buf.size());
      for (ssize_t done = 0; n > 0 && done < n;) {
        const ssize_t w = write(out, buf.data() + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return absl::UnavailableError(absl::StrCat("writing ", name, ": ", Errno(errno)));
        done += w;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("copying ", name, ": ", Errno(errno)));
    if (n == 0) return absl::OkStatus();
  }
}

absl::Status Copy(int from, const struct stat& st, int to_dir, const std::string& name, int depth) {
  if (S_ISREG(st.st_mode)) {
    // Whether its owner may run it is all that is kept of the source's mode.
    const mode_t mode = (st.st_mode & S_IXUSR) != 0 ? 0700 : 0600;
    UniqueFd out(openat(to_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (out.get() < 0) return absl::UnavailableError(absl::StrCat("creating ", name, ": ", Errno(errno)));
    return CopyBytes(from, out.get(), name);
  }
  if (!S_ISDIR(st.st_mode)) return absl::OkStatus();
  if (depth > kMaxDepth) return absl::UnavailableError(absl::StrCat(name, ": deeper than ", kMaxDepth, " directories"));
  if (mkdirat(to_dir, name.c_str(), 0700) != 0) {
    return absl::UnavailableError(absl::StrCat("creating directory ", name, ": ", Errno(errno)));
  }
  UniqueFd to(openat(to_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (to.get() < 0) return absl::UnavailableError(absl::StrCat("opening ", name, ": ", Errno(errno)));
  auto names = Names(from);
  if (!names.ok()) return names.status();
  for (const std::string& entry : *names) {
    struct stat before;
    if (fstatat(from, entry.c_str(), &before, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // gone since the listing
      return absl::UnavailableError(absl::StrCat("reading ", entry, ": ", Errno(errno)));
    }
    // Links are left out; so are devices, FIFOs and sockets, which are never opened.
    if (!S_ISDIR(before.st_mode) && !S_ISREG(before.st_mode)) continue;
    // O_NOFOLLOW: a link swapped in since fstatat fails here (ELOOP), O_NONBLOCK: a FIFO
    // swapped in does not hang the copy, and O_DIRECTORY for what was a directory.
    UniqueFd in(openat(from, entry.c_str(),
                       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
                           (S_ISDIR(before.st_mode) ? O_DIRECTORY : 0)));
    if (in.get() < 0) {
      if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR || errno == ENXIO) continue;  // swapped or gone
      return absl::UnavailableError(absl::StrCat("opening ", entry, ": ", Errno(errno)));
    }
    struct stat now;
    if (fstat(in.get(), &now) != 0) return absl::UnavailableError(absl::StrCat("reading ", entry, ": ", Errno(errno)));
    // Something else swapped in between the two looks: left out, as a link would be.
    if ((now.st_mode & S_IFMT) != (before.st_mode & S_IFMT)) continue;
    if (absl::Status s = Copy(in.get(), now, to.get(), entry, depth + 1); !s.ok()) return s;
  }
  return absl::OkStatus();
}

mode_t ModeFor(const struct stat& st, const TreeAccess& access) {
  if (S_ISDIR(st.st_mode)) return access.others_read ? 0755 : 0750;
  const bool exec = (st.st_mode & S_IXUSR) != 0;
  if (access.others_read) return exec ? 0755 : 0644;
  return exec ? 0750 : 0640;
}

absl::Status Seal(int dir, const std::string& name, const TreeAccess& access, int depth) {
  struct stat st;
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return absl::UnavailableError(absl::StrCat("reading ", name, ": ", Errno(errno)));
  }
  if (S_ISLNK(st.st_mode)) {
    if (access.change_owner && fchownat(dir, name.c_str(), access.uid, access.gid, AT_SYMLINK_NOFOLLOW) != 0) {
      return absl::UnavailableError(absl::StrCat("handing over ", name, ": ", Errno(errno)));
    }
    return absl::OkStatus();
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    // A device node, FIFO or socket a mover command made: nothing a dataset needs.
    if (unlinkat(dir, name.c_str(), 0) != 0) {
      return absl::UnavailableError(absl::StrCat("removing special file ", name, ": ", Errno(errno)));
    }
    return absl::OkStatus();
  }
  if (depth > kMaxDepth) return absl::UnavailableError(absl::StrCat(name, ": deeper than ", kMaxDepth, " directories"));
  UniqueFd fd(openat(dir, name.c_str(),
                     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
                         (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0)));
  if (fd.get() < 0) return absl::UnavailableError(absl::StrCat("opening ", name, ": ", Errno(errno)));
  struct stat now;
  if (fstat(fd.get(), &now) != 0 || (now.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) {
    return absl::UnavailableError(absl::StrCat(name, " changed while it was handed over"));
  }
  if (S_ISDIR(now.st_mode)) {
    auto names = Names(fd.get());
    if (!names.ok()) return names.status();
    for (const std::string& entry : *names) {
      if (absl::Status s = Seal(fd.get(), entry, access, depth + 1); !s.ok()) return s;
    }
  }
  // Children first: a directory opens to its owner once everything in it is theirs.
  if (access.change_owner && fchown(fd.get(), access.uid, access.gid) != 0) {
    return absl::UnavailableError(absl::StrCat("handing over ", name, ": ", Errno(errno)));
  }
  if (fchmod(fd.get(), ModeFor(now, access)) != 0) {
    return absl::UnavailableError(absl::StrCat("setting the mode of ", name, ": ", Errno(errno)));
  }
  return absl::OkStatus();
}

absl::Status Remove(int dir, const std::string& name, int depth) {
  struct stat st;
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("reading ", name, ": ", Errno(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    if (depth > kMaxDepth) {
      return absl::UnavailableError(absl::StrCat(name, ": deeper than ", kMaxDepth, " directories"));
    }
    UniqueFd fd(openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() >= 0) {
      auto names = Names(fd.get());
      if (!names.ok()) return names.status();
      for (const std::string& entry : *names) {
        if (absl::Status s = Remove(fd.get(), entry, depth + 1); !s.ok()) return s;
      }
      if (unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return absl::OkStatus();
    }
    if (errno != ENOTDIR && errno != ELOOP) {
      return absl::UnavailableError(absl::StrCat("removing ", name, ": ", Errno(errno)));
    }
    // No longer a directory: removed as the entry it became.
  }
  if (unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) {
    return absl::UnavailableError(absl::StrCat("removing ", name, ": ", Errno(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<UniqueFd> OpenBeneath(int dirfd, const std::string& relative, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const std::string path = relative.empty() ? std::string(".") : relative;
  long fd;
  do {
    fd = syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof(how));
  } while (fd < 0 && (errno == EINTR || errno == EAGAIN));
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  const int err = errno;
  switch (err) {
    case ELOOP:
    case EXDEV:
      return absl::PermissionDeniedError(
          absl::StrCat(path, " leads through a symbolic link or out of its directory: not followed"));
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(absl::StrCat(path, ": ", Errno(err)));
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(absl::StrCat(path, ": ", Errno(err)));
    default:
      return absl::UnavailableError(absl::StrCat("opening ", path, ": ", Errno(err)));
  }
}

absl::Status CopyTreeAt(int from, int to_dir, const std::string& name) {
  struct stat st;
  if (fstat(from, &st) != 0) return absl::UnavailableError(absl::StrCat("reading the source: ", Errno(errno)));
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError("the source is neither a directory nor a regular file");
  }
  return Copy(from, st, to_dir, name, 0);
}

absl::Status SealTreeAt(int dir, const std::string& name, const TreeAccess& access) {
  return Seal(dir, name, access, 0);
}

absl::Status RemoveTreeAt(int dir, const std::string& name) { return Remove(dir, name, 0); }

absl::Status RemoveTreeAs(int dir, const std::string& name, uid_t uid, gid_t gid) {
  if (geteuid() != 0 || uid == 0) return RemoveTreeAt(dir, name);
  struct stat st;
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("reading ", name, ": ", Errno(errno)));
  }
  absl::Status inside = absl::OkStatus();
  if (S_ISDIR(st.st_mode)) {
    CopyAccount as;
    as.name = absl::StrCat("uid ", uid);
    as.uid = uid;
    as.gid = gid;
    as.groups = {gid};
    ScopedFileIdentity identity(as);
    if (!identity.status().ok()) return identity.status();
    UniqueFd fd(openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() >= 0) {
      auto names = Names(fd.get());
      if (!names.ok()) return names.status();
      for (const std::string& entry : *names) {
        if (absl::Status s = Remove(fd.get(), entry, 1); !s.ok() && inside.ok()) inside = s;
      }
    }
  }
  if (!inside.ok()) {
    return absl::UnavailableError(
        absl::StrCat(name, " is left in place: it holds what uid ", uid, " could not remove (", inside.message(), ")"));
  }
  // The entry itself, by root (its parent is root's): a directory only once empty (rmdir
  // fails otherwise), anything else only when it is uid's own.
  if (S_ISDIR(st.st_mode)) {
    if (unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(name, " is left in place: ", Errno(errno)));
  }
  if (st.st_uid != uid) {
    return absl::UnavailableError(
        absl::StrCat(name, " is left in place: it is uid ", st.st_uid, "'s, not uid ", uid, "'s"));
  }
  if (unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) {
    return absl::UnavailableError(absl::StrCat("removing ", name, ": ", Errno(errno)));
  }
  return absl::OkStatus();
}

}  // namespace jc::adapter
