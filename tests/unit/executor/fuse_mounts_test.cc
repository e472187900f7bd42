// Which mount a descriptor lies on, and whether an account serves it (fuse_mounts.h): the scan
// of /proc/self/mountinfo the agent's open-as-account helper makes before it hands the agent a
// descriptor (attacker helper-85).

#include "executor/agent/fuse_mounts.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <catch2/catch.hpp>
#include <sstream>
#include <string>

using jc::nexec::MountInfoScan;
using Verdict = MountInfoScan::Verdict;

namespace {

// A mountinfo text as the kernel writes it: other mounts around the one looked for, one of
// them an overlay whose options are longer than any buffer of the scan's.
std::string Table(const std::string& line) {
  std::string overlay_options = "rw,lowerdir=";
  for (int i = 0; i < 300; ++i) overlay_options += "/var/lib/layers/" + std::to_string(i) + ":";
  return "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
         "123 22 0:50 / /proc/sys/fs/binfmt_misc rw,relatime shared:30 - autofs systemd-1 rw,fd=29\n"
         "40 1 0:33 / /var/lib/docker/x/merged rw,relatime - overlay overlay " +
         overlay_options + "\n" + line +
         "\n"
         "1234 1 0:80 / /mnt/other rw - fuse.other other rw,user_id=0,group_id=0\n";
}

Verdict Scan(long id, const std::string& text, size_t piece, long* owner = nullptr) {
  MountInfoScan scan(id);
  for (size_t at = 0; at < text.size(); at += piece) scan.Feed(text.data() + at, std::min(piece, text.size() - at));
  const Verdict v = scan.Finish();
  if (owner != nullptr) *owner = scan.owner();
  return v;
}

}  // namespace

TEST_CASE("a FUSE mount an account made is told from root's and from other file systems, a proc file system among them, "
          "in pieces of any size",
          "[B9][C6]") {
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 20}) {
    INFO("pieces of " << piece);
    long owner = -2;
    CHECK(Scan(12, Table("12 1 0:40 / /home/alice/s3 rw,nosuid,nodev,relatime shared:99 master:3 - fuse.s3fs s3fs "
                         "rw,xuser_id=0,user_id=1000,group_id=1000"),
               piece, &owner) == Verdict::kFuseOfAccount);
    CHECK(owner == 1000);
    CHECK(Scan(12, Table("12 1 0:40 / /mnt/juicefs rw,relatime shared:4 - fuse.juicefs JuiceFS:jfs "
                         "rw,user_id=0,group_id=0,default_permissions,allow_other"),
               piece, &owner) == Verdict::kFuseOfRoot);
    CHECK(owner == 0);
    // user_id among the mount options (before "-") is not the super block's.
    CHECK(Scan(12, Table("12 1 0:40 / /mnt/x rw,user_id=0 - fuse x rw,user_id=1001,group_id=1001"), piece) ==
          Verdict::kFuseOfAccount);
    CHECK(Scan(12, Table("12 1 0:40 / /mnt/blk rw - fuseblk /dev/sdb1 rw,user_id=0,group_id=0"), piece) ==
          Verdict::kFuseOfRoot);
    // A FUSE mount that names no owner is not taken for root's.
    CHECK(Scan(12, Table("12 1 0:40 / /mnt/y rw - fuse y rw"), piece) == Verdict::kFuseOfAccount);
    // Not FUSE: a mount point spelled with escapes, even one named like the separator.
    CHECK(Scan(12, Table("12 1 8:1 / /mnt/a\\040-\\040b rw,relatime - ext4 /dev/sda1 rw"), piece) ==
          Verdict::kNotFuse);
    CHECK(Scan(12, Table("12 1 0:44 / /mnt/v rw - virtiofs tag rw"), piece) == Verdict::kNotFuse);
    // 12 is not 123 nor 1234, and the overlay's long line leads nowhere.
    CHECK(Scan(12, Table("99 1 0:40 / /mnt/z rw - fuse z rw,user_id=0"), piece) == Verdict::kNotFound);
    CHECK(Scan(1234, Table("99 1 0:40 / /mnt/z rw - fuse z rw,user_id=7"), piece) == Verdict::kFuseOfRoot);
    CHECK(Scan(40, Table(""), piece) == Verdict::kNotFuse);
    // A proc file system, wherever it is mounted (a task's output there is refused; attacker
    // helper-95's /proc/self/mem); one whose source is named "proc" is not.
    CHECK(Scan(22, Table(""), piece) == Verdict::kProc);
    CHECK(Scan(12, Table("12 1 0:60 / /srv/chroot/proc rw,relatime - proc proc rw,hidepid=2"), piece) ==
          Verdict::kProc);
    CHECK(Scan(12, Table("12 1 0:61 / /mnt/t rw - tmpfs proc rw"), piece) == Verdict::kNotFuse);
  }
  // The last line without its newline.
  CHECK(Scan(5, "5 1 0:40 / /m rw - fuse m rw,user_id=42", 3) == Verdict::kFuseOfAccount);
  // A line cut short (no separator) is no answer.
  CHECK(Scan(5, "5 1 0:40 / /m rw\n", 3) == Verdict::kNotFound);
}

TEST_CASE("the mount of a descriptor is found in this process's own tables", "[B9][C6]") {
  const int root = open("/", O_PATH | O_CLOEXEC);
  REQUIRE(root >= 0);
  CHECK(jc::nexec::MountIdOf(root) > 0);
  // The root file system of a test host is not an account's FUSE mount, nor proc; /proc is.
  Verdict verdict = Verdict::kNotFound;
  CHECK(jc::nexec::MountVerdictOf(root, &verdict) == 0);
  CHECK(verdict != Verdict::kFuseOfAccount);
  CHECK(verdict != Verdict::kProc);
  CHECK(verdict != Verdict::kNotFound);
  const int proc = open("/proc/self", O_PATH | O_CLOEXEC);
  REQUIRE(proc >= 0);
  CHECK(jc::nexec::MountVerdictOf(proc, &verdict) == 0);
  CHECK(verdict == Verdict::kProc);
  close(proc);
  close(root);
  errno = 0;
  CHECK(jc::nexec::MountIdOf(-1) == -1);
  CHECK(errno == EBADF);
  // A descriptor closed is no longer in this process's table.
  CHECK(jc::nexec::MountIdOf(root) == -1);
  CHECK(errno == ENOENT);
}
