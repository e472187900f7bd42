#pragma once

// The agent's task table (SPEC B1, B6, B8): the tasks running here by key, the last
// attempt of each job's task for its log reads, the attempts that already ran (so a
// repeated launch never runs one twice), and the exits and notes sent with every
// heartbeat until the master acknowledges them. Plain data: the agent holds it under its
// own lock (Agent::mu_, which guards it), and says when tasks start, change and end.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "executor/agent/task_runner.h"
#include "executor/agent/user_files.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

class TaskBook {
 public:
  struct Task {
    int64_t job_id;
    int32_t task_index;
    int32_t attempt;
    std::string stdout_path;
    std::string stderr_path;
    bool suspended = false;
    std::vector<int> gpus;                   // given to the task
    std::set<int> misused;                   // GPUs it was found on without them, reported once each
    double gpu_memory_mb = 0, gpu_utilization = 0;  // from the last GPU sample
    // Queue actions (B6): a task runs its pre-exec, then its command, then its
    // post-exec, one process (group) after the other under the same key.
    enum class Phase { kPre, kCommand, kPost } phase = Phase::kCommand;
    // Its phase's start waits on the agent's phase starter: no process, no input yet.
    bool starting = false;
    TaskLaunch command;              // started once the pre-exec succeeded
    std::string post_exec;
    absl::Time pre_exec_deadline = absl::InfiniteFuture();
    bool pre_exec_timed_out = false;
    int pre_exec_timeout_seconds = 0;
    int command_exit = 0;            // reported once the post-exec is done
    // Job controls: commands instead of the signals; a kill action's grace.
    std::string suspend_action, resume_action, kill_action;
    int kill_grace_seconds = 10;
    absl::Time kill_deadline = absl::InfiniteFuture();
    int actions_run = 0;
    // Elastic jobs (task 0): the job's event file and how many resize events it holds.
    std::string event_file;
    std::shared_ptr<OwnedFd> event_fd;  // opened as the job's user; shared by the copies in the log entries
    int events_written = 0;
  };

  // How many finished attempts are remembered (a hash set: each launch asks it).
  static constexpr size_t kFinishedKept = 100000;

  // The tasks running here, by task key.
  std::map<std::string, Task>& running() { return tasks_; }
  const std::map<std::string, Task>& running() const { return tasks_; }
  // Whether the attempt `key` runs or already ran here.
  bool Knows(const std::string& key) const { return tasks_.count(key) > 0 || finished_.count(key) > 0; }
  // A task registered before its process starts: running, and its job's task's log.
  void Add(const std::string& key, Task task);
  // A task that never started: no longer running (its log entry stays).
  void Drop(const std::string& key) { tasks_.erase(key); }
  // A task that ended: no longer running, and remembered as finished (the last
  // kFinishedKept).
  void Finish(const std::string& key);
  // A task a predecessor agent left (killed, or ended unseen): finished, and `exit` sent
  // until acknowledged.
  void Inherit(const std::string& key, const ::nexec::v1::TaskReport& exit);
  // The last attempt of a job's task here (its output's paths and user); null if none.
  const Task* LogOf(int64_t job_id, int32_t task_index) const;

  // Exits and notes, sent with every heartbeat until one is taken.
  void AddExit(const ::nexec::v1::TaskReport& exit) { unacked_exits_.push_back(exit); }
  void AddNote(const ::nexec::v1::TaskNote& note) { unacked_notes_.push_back(note); }
  const std::vector<::nexec::v1::TaskReport>& exits() const { return unacked_exits_; }
  // Of those, the exits of tasks this agent process saw end (not a predecessor's).
  size_t own_exits() const { return unacked_exits_.size() - inherited_unacked_; }
  const std::vector<::nexec::v1::TaskNote>& notes() const { return unacked_notes_; }
  // The agent now serves another master's store, with no task running: what it remembers
  // of the old store's attempts (ran, unreported exits and notes, logs) is not the new
  // one's, whose job numbers start over.
  void ForgetStore();
  // The master took a heartbeat carrying the first `exits` exits and `notes` notes.
  void Acknowledge(size_t exits, size_t notes);

 private:
  std::map<std::string, Task> tasks_;                     // running, by task key
  std::map<std::pair<int64_t, int32_t>, Task> logs_;      // last attempt per job and task, for ReadLog
  absl::flat_hash_set<std::string> finished_;             // attempts that ran here, the last kFinishedKept
  std::deque<std::string> finished_order_;
  std::vector<::nexec::v1::TaskReport> unacked_exits_;    // sent until a heartbeat succeeds
  size_t inherited_unacked_ = 0;                          // the first of them, a predecessor's
  std::vector<::nexec::v1::TaskNote> unacked_notes_;      // likewise
};

}  // namespace jc::nexec
