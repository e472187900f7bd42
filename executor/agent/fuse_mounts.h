#pragma once

// File systems an account serves (attacker helper-85): a FUSE file system is answered by a
// daemon, and one an account mounted is answered by the account. A root process that closes
// a descriptor of a file there waits, uninterruptibly and for ever, for the FLUSH the daemon
// never answers (SIGKILL does not end the wait; the whole agent cannot exit), and one that
// walks a path into it waits as long for a LOOKUP. So the agent never holds a descriptor on
// such a file system: what its open-as-account helper (user_files.h) would hand it is checked
// here first, from the kernel's own tables (/proc/self/fdinfo, /proc/self/mountinfo), without
// a single request to the file system itself. A FUSE mount root made (user_id=0: the admin's
// shared storage, JuiceFS, s3fs) is trusted as any other of root's mounts.
//
// Everything here is async-signal-safe and allocates nothing: it runs in a child forked from
// the threaded agent.

#include <cstddef>
#include <istream>
#include <string>
#include <vector>

namespace jc::nexec {

// Reads /proc/self/mountinfo's text, in pieces of any size, for the line of one mount.
class MountInfoScan {
 public:
  enum class Verdict {
    kNotFound,      // no line for the mount (it went meanwhile)
    kNotFuse,       // not FUSE
    kFuseOfRoot,    // FUSE, mounted by root (user_id=0)
    kFuseOfAccount,  // FUSE mounted by an account (user_id=N, N != 0; or no user_id at all)
    kProc            // a proc file system: processes, no task's files
  };

  explicit MountInfoScan(long mount_id) : target_(mount_id) {}
  void Feed(const char* data, size_t size);
  // After the last piece (a last line without its newline counts).
  Verdict Finish();
  // The mount's user_id for a FUSE mount, -1 when none was given.
  long owner() const { return owner_; }

 private:
  void EndToken(bool end_of_field);
  void EndLine();

  const long target_;
  // Where the scan is in the current line: its field (space-separated), and whether the line
  // is of another mount (its rest skipped).
  int field_ = 0;
  bool skip_ = false;
  int separator_field_ = -1;  // the field holding "-", which ends the optional fields
  // The current token: a field, or one comma-separated option of the super options.
  char token_[48] = {};
  size_t token_size_ = 0;
  bool token_long_ = false;  // longer than token_: compared as "no match"
  bool found_ = false, fuse_ = false, proc_ = false;
  long owner_ = -1;
};

// `n` (0 or more) in decimal at `out`, which has room for 20 digits; returns the end.
char* AppendDecimal(char* out, long n);

// The mount id of `fd` (/proc/self/fdinfo), or -1 with errno set.
long MountIdOf(int fd);

// What kind of mount `fd` lies on, from this process's mount table, at `verdict`: 0, or -1
// with errno set when the kernel's tables could not be read (ESTALE: its mount is not in this
// process's table, another mount namespace's). `fd` may be O_PATH. Async-signal-safe.
int MountVerdictOf(int fd, MountInfoScan::Verdict* verdict);


}  // namespace jc::nexec
