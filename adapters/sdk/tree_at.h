#pragma once

// Directory trees copied, handed over and removed by descriptor (issue 44 hole 8): the
// adapter runs as root and stages datasets out of directories a project's members write.
// A path re-resolved by root at each step follows whatever link a member swaps in between
// two steps (3 of 6 races copied another project's file). Here every open is relative to a
// directory descriptor already held: a longer path with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS), a directory's entries one name at a time with O_NOFOLLOW. A link
// swapped in anywhere, at any moment, makes that open fail; it never leads elsewhere.

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace jc::adapter {

// A descriptor closed with its owner.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  ~UniqueFd();
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// `relative` ("" or "." for `dirfd` itself) opened below `dirfd` with `flags`, never
// leaving it and following no symbolic link on the way (openat2 with RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS). A link or a ".." that would climb out is
// PermissionDenied; a missing entry NotFound.
absl::StatusOr<UniqueFd> OpenBeneath(int dirfd, const std::string& relative, int flags, mode_t mode = 0);

// Copies what `from` holds (a directory, recursively, or a regular file) into a new entry
// `name` of directory `to_dir` (created, never replacing anything). Only directories and
// regular files are copied, each opened by name relative to its parent's descriptor with
// O_NOFOLLOW: links, device nodes, FIFOs and sockets are left out, whenever they appear.
// Copies get modes 0700 (directories) and 0600 (files; 0700 when the source's owner may
// execute it) of this process's account: the caller hands the tree over with SealTreeAt
// once it is complete.
absl::Status CopyTreeAt(int from, int to_dir, const std::string& name);

// Who may read a staged tree: `uid`:`gid` own it (`change_owner` false: left to this
// process), directories get 0750 and files 0640 (0750 when the owner may execute), or
// 0755 and 0644 (0755) with `others_read`. Set-id and sticky bits never survive; entries
// that are neither directories, regular files nor links are removed.
struct TreeAccess {
  std::string account;  // the account uid names (for copying with its rights: copy_as.h)
  bool change_owner = false;
  uid_t uid = 0;
  gid_t gid = 0;
  bool others_read = false;
};
absl::Status SealTreeAt(int dir, const std::string& name, const TreeAccess& access);

// Removes entry `name` of `dir` and, when it is a directory, everything below it, each
// entry by name relative to its parent's descriptor (a link is removed, never followed).
// Missing is fine.
absl::Status RemoveTreeAt(int dir, const std::string& name);

// The same for a tree an account controlled (a copy it made, a copy handed to it): what is
// below `name` is removed with that account's file rights (copy_as.h), so an inode of
// someone else's it renamed in is never removed by root; `name` itself (in a directory of
// root's) is removed by root once it is an empty directory or a file of `uid`'s. What is
// left is an error naming it, and stays in place.
absl::Status RemoveTreeAs(int dir, const std::string& name, uid_t uid, gid_t gid);

}  // namespace jc::adapter
