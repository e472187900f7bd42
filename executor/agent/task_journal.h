#pragma once

// The agent's record of the tasks it started, for the agent that follows it on the host
// after a crash (B6: no attempt runs twice; no task is left running unknown): one
// append-only file of short lines instead of one file per task, which cost an inode
// allocation, two writes and an unlink per task (at thousands of tasks a second, ext4's
// inode allocation was the agent's largest cost after fork: issue 32 item 6).
//
//   S <key>                 the task is about to start (its process group not known yet)
//   P <key> <pgid> <start>  its process group, with the leader's start time (written at
//                           the agent's round after the start, for tasks still running:
//                           one that ends before has none, and needs none)
//   X <key> <exit code>     it ended, its exit not yet taken by the master
//   E <key>                 the master took its exit (or it belongs to a store no longer served)
//
// Lines are written without fsync: the journal must survive the agent's death, not the
// host's (a rebooted host has no tasks left). A line cut short by a crash is ignored. The
// file is rewritten with only the live tasks once ended lines dominate it.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jc::nexec {

struct JournaledTask {
  pid_t pgid = 0;          // 0: started, group not recorded
  uint64_t start_time = 0;  // the leader's start time (/proc/<pid>/stat field 22)
  // It ended with this code, and the master has not taken its exit yet: a successor
  // reports it so (and never runs that attempt again), killing nothing.
  std::optional<int> exit_code;
};

class TaskJournal {
 public:
  // Reads what the previous agent left at `path` (and, from agents before the journal,
  // one file per task in `legacy_dir`, which is emptied), then starts a fresh journal.
  // The tasks read are returned by Inherited().
  static absl::StatusOr<std::unique_ptr<TaskJournal>> Open(const std::string& path, const std::string& legacy_dir);
  ~TaskJournal();

  const std::map<std::string, JournaledTask>& Inherited() const { return inherited_; }

  // Each writes one line before it returns (commit or stop: an error means the agent must
  // not start the task).
  absl::Status Starting(const std::string& key);
  // A launch batch's tasks: their lines in one write (all recorded, or the error).
  absl::Status Starting(const std::vector<std::string>& keys);
  absl::Status Started(const std::string& key, pid_t pgid, uint64_t start_time);
  // Tasks that ended, with their exit codes (a round's exits, in one write): still the
  // journal's until their exits are taken (Ended), so an agent that dies before its master
  // took them leaves them to its successor to report.
  absl::Status Exited(const std::vector<std::pair<std::string, int>>& keys_and_codes);
  // The master took their exits: gone from the journal.
  absl::Status Ended(const std::string& key);
  // Several at once: their lines in one write.
  absl::Status Ended(const std::vector<std::string>& keys);

  // The live tasks as the file says, read back from disk (for tests and the successor).
  static std::map<std::string, JournaledTask> Read(const std::string& path);

 private:
  TaskJournal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Append(const std::string& line);
  absl::Status CompactLocked();

  const std::string path_;
  std::mutex mu_;
  int fd_;
  std::map<std::string, JournaledTask> live_;
  std::map<std::string, JournaledTask> inherited_;
  int64_t lines_ = 0;
};

}  // namespace jc::nexec
