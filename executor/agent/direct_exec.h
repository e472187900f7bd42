#pragma once

// A task's command without shell syntax is exec'd directly, as LSF and Slurm do (issue 48):
// `sleep 60` or `/opt/app/train --epochs=3` needs no /bin/sh between the agent and the
// program, which costs a shell's exec and start per task. Anything a shell would read
// otherwise (quotes, variables, globs, redirections, pipes, `;`, a builtin such as `cd` or
// `exit`, an assignment) keeps going through `/bin/sh -c`, and so does a program that is
// not found, or not plainly a system program anyone may run: the shell's own words ("not
// found", exit 127) stay the answer there.

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace jc::nexec {

// A command run as its program: `program` is exec'd with `argv`, whose first word is the
// command's own (`sleep`, as the shell passes it, not the path found).
struct DirectCommand {
  std::string program;
  std::vector<std::string> argv;
};

// `command` as its program when it has no shell syntax, its first word resolved through
// `path` (a task's $PATH) to the program a shell would run; nullopt: run it with /bin/sh -c.
// The program is run directly only when the shell would find the same file and the task's
// account may run it for sure: a regular file owned by root, executable by all, written by
// root alone, in directories (and through links) root owns and writes alone, starting as
// an ELF or "#!" file; and the search looks only in directories anyone may search, reached
// through root's alone, so that root's look tells the account nothing it could not see.
// (Reading the first bytes of a file root owns and alone writes reads nothing a user controls.)
std::optional<DirectCommand> DirectArgv(absl::string_view command, absl::string_view path);

// DirectArgv with what its search found kept for the tasks after it: the search is about
// twenty system calls (an lstat per component of every directory on the way, the program's
// first bytes), 14% of an agent's CPU per `sleep 0` task (perf, issue 48), and most tasks
// of a host run the few programs its users run. A program found is used again while the
// directories searched, and the program, are the files they were when it was found, so a
// program root puts in an earlier directory of $PATH, one removed, replaced, or given other
// permissions is seen by the next task, as the shell would see it. How that is known:
//   - files on a disk of this host (ext4, xfs, btrfs, tmpfs, ...) are watched with inotify,
//     with every directory on their paths from / (a link on the way re-pointed, a directory
//     above renamed): the kernel queues an event as the change is made, so the next task's
//     look, one read of the queue, sees it; any event drops every answer kept (root changes
//     these rarely). At most 256 watches (root's inotify budget is the host's daemons' too);
//   - others (NFS, Lustre: changed from other hosts too, unseen by this kernel's inotify)
//     are each stat'ed again before the answer is used (device, inode, modification and
//     change times).
// Only root can change any of them (the search passed only through root's alone), and what
// neither sees (a file system mounted over one; elsewhere than this host's disks, a link
// or a directory above that root changed in a way a stat of the path does not show) is
// looked at anew by walking the search again whole once its answer is 10 s
// old (as is a change root makes while the search itself runs). "Run it with the shell" is
// kept 10 s as it is: the shell, which searches for itself, is right whatever changed.
// Safe to use from any thread.
class ProgramCache {
 public:
  // `watch`: false stats every file again before each use, as for files of other hosts (tests).
  explicit ProgramCache(bool watch = true);
  ~ProgramCache();
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  std::optional<DirectCommand> DirectArgv(absl::string_view command, absl::string_view path);

  // Answers given from what was kept, and inotify watches held (for tests).
  int64_t hits() const;
  size_t watches() const;

  static constexpr absl::Duration kWalkedAgainAfter = absl::Seconds(10);
  static constexpr size_t kMaxEntries = 1024;  // then every entry goes (a host runs few programs)
  // inotify watches: the kernel's budget for them is root's, shared with the host's other
  // daemons (8,192 before Linux 5.11), and an account's $PATH says how many an answer needs.
  static constexpr size_t kMaxWatchesPerAnswer = 32;  // more: the answer is stat'ed instead
  static constexpr size_t kMaxWatches = 256;          // then every answer goes, with its watches
  // File times come from a coarse clock (a tick of up to 10 ms; whole seconds on ext4 with
  // 128-byte inodes and some NFS servers): a change in the same tick as the look can leave
  // them as they were. An answer that looked at a file changed this recently is not kept
  // (git's "racy" entries; helper-62 finding 3).
  static constexpr absl::Duration kRacy = absl::Seconds(2);

  // What stat says of a file; equal when it is the same file, unchanged.
  struct Identity {
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t mtime_ns = 0;
    int64_t ctime_ns = 0;
    friend bool operator==(const Identity&, const Identity&) = default;
  };

 private:
  struct Entry {
    std::string program;  // "" when the shell runs it
    std::vector<std::pair<std::string, Identity>> looked;
    absl::Duration walked;  // on the monotonic clock
    bool watched = false;   // every file looked at is watched: no stat before use
  };
  // Drops every answer kept when the queue of changes is not empty (or cannot be read).
  void DropIfChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every answer, and every watch (a new queue).
  void DropAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Watches every file `entry` looked at, then checks that each is still as looked at (a
  // change between the look and the watch shows there); false: not watched, stat instead.
  bool WatchLocked(const Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by first word NUL $PATH
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  const bool watch_;
  int changes_ ABSL_GUARDED_BY(mu_) = -1;  // the inotify queue; -1 when there is none
  absl::flat_hash_set<int> watches_ ABSL_GUARDED_BY(mu_);  // on it (one per file watched)
};

// Whether `name` is a name the shell passes on in the environment (letters, digits and
// `_`, not starting with a digit): a task whose environment has any other (a bash function's
// `BASH_FUNC_x%%`, `A-B`) goes through the shell, which drops them, as it always did.
bool ShellName(absl::string_view name);

}  // namespace jc::nexec
