#pragma once

// Group commit: concurrent callers' writes share one transaction (and one fsync). The
// first caller to arrive becomes the leader, takes everything queued, commits it, and
// wakes the others; each caller returns only once its write is durable. Under load this
// turns N fsyncs into one without delaying a lone caller.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "common/store/store.h"

namespace jc::store {

class GroupCommitter {
 public:
  explicit GroupCommitter(Store* store) : store_(store) {}

  // Runs `write` inside a shared transaction and returns once it is committed. If the
  // shared transaction fails, each write is retried alone so one bad write does not fail
  // its neighbours.
  absl::Status Commit(std::function<absl::Status(Transaction&)> write);

  // Runs first in every transaction; when it fails, nothing of the batch is written. The
  // job manager fences its writes with it: they land only while its lease holds. Set it
  // before the first Commit.
  void SetPrologue(std::function<absl::Status(Transaction&)> prologue) { prologue_ = std::move(prologue); }
  // Runs after every transaction that committed, in the committing thread, before any of
  // its callers returns, one transaction at a time: what must follow the commit in commit
  // order (the adapter publishes its events with the cursors the transaction gave them).
  // The prologue resets what the writes gather; the epilogue acts on it.
  void SetEpilogue(std::function<void()> epilogue) { epilogue_ = std::move(epilogue); }

 private:
  struct Entry {
    std::function<absl::Status(Transaction&)> write;
    absl::Status result;
    bool done = false;
    // Its caller waits here alone: a finished batch wakes its own callers and the next
    // leader, not every caller queued behind it (who would only wait again).
    std::condition_variable cv;
  };
  absl::Status RunBatch(const std::vector<std::shared_ptr<Entry>>& batch);

  Store* store_;
  std::function<absl::Status(Transaction&)> prologue_;
  std::function<void()> epilogue_;
  std::mutex mu_;
  std::deque<std::shared_ptr<Entry>> queue_;
  bool leader_active_ = false;
};

}  // namespace jc::store
