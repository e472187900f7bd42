#pragma once

// SQLite's WAL checkpoints, moved off the committing thread.
//
// In WAL mode a commit appends to the -wal file, and by default the commit that takes the
// WAL past 1,000 pages also copies it into the database file and syncs that (a PASSIVE
// checkpoint) before it returns. In the adapter that commit is a SubmitReplicas call: at
// 1,000 replicas a second about one call a second took 2–13 ms longer, and every replica
// waiting for a sender behind it too (session 66, docs/benchmarks.md). Here the writer's
// WAL hook only wakes a thread of the store's own, which checkpoints on a second
// connection to the same file while the writer goes on appending (WAL lets a checkpoint and
// a writer run at once). A WAL starts again from its beginning only when a write begins
// after a checkpoint copied all of it; under a steady stream of commits the thread never
// quite catches up, so past kInlineFrames the writer checkpoints in line after all, as
// SQLite would have at 1,000 pages. By then the thread has copied all but the last few
// commits' pages, so that checkpoint copies little and syncs once; and should the thread
// fall behind (a slow disk, a reader holding old pages) the WAL stays bounded all the same.

#include <sqlite3.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace jc::store {

class WalCheckpointer {
 public:
  // The WAL's length, in pages, at which a commit wakes the checkpointer (SQLite's own
  // default for its in-line checkpoint).
  static constexpr int kWakeFrames = 1000;
  // ... and at which the committing connection checkpoints in line after all (16 MB of
  // 4 KiB pages).
  static constexpr int kInlineFrames = 4 * kWakeFrames;

  // Opens its connection to the database file `path` (already in WAL mode) and starts its
  // thread. An error: the caller keeps SQLite's in-line checkpoints.
  static absl::StatusOr<std::unique_ptr<WalCheckpointer>> Start(const std::string& path);
  // Stops the thread (a checkpoint under way completes first) and closes the connection.
  ~WalCheckpointer();
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // Installs the WAL hook on the writer's connection `writer`, which must outlive neither
  // this object's use of it nor be used by another hook. Its commits then wake this
  // checkpointer, and past kInlineFrames checkpoint in line.
  void Attach(sqlite3* writer);

  // Checkpoints run by the thread, and in line by the writer (for tests and figures).
  int64_t background_checkpoints() const { return background_.load(std::memory_order_relaxed); }
  int64_t inline_checkpoints() const { return inline_.load(std::memory_order_relaxed); }

 private:
  explicit WalCheckpointer(sqlite3* db);
  static int OnCommit(void* self, sqlite3* writer, const char* schema, int frames);
  void Wake();
  void Run();

  sqlite3* db_;  // used only by thread_ once it runs
  std::mutex mu_;
  std::condition_variable cv_;
  bool wanted_ = false;
  bool stopping_ = false;
  std::atomic<int64_t> background_{0};
  std::atomic<int64_t> inline_{0};
  std::thread thread_;
};

}  // namespace jc::store
