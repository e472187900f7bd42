#pragma once

// A bounded, in-memory log of events with increasing revisions, for server-streaming
// watches: a watcher replays what it missed (if still in the window) and then waits for
// more. The same shape as etcd's watch: a revision that fell out of the window is
// reported so the watcher can start over from a fresh snapshot.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <mutex>
#include <vector>

#include "absl/time/time.h"

namespace jc {

template <typename Event>
class EventLog {
 public:
  explicit EventLog(size_t window = 4096) : window_(window) {}

  // Stamps the event with the next revision (via `set_revision`) and appends it.
  uint64_t Append(Event event, const std::function<void(Event&, uint64_t)>& set_revision) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t rev = ++last_;
    set_revision(event, rev);
    events_.push_back(std::move(event));
    if (events_.size() > window_) events_.pop_front();
    cv_.notify_all();
    return rev;
  }

  // Starts the log over from events that were persisted (oldest first), the last of
  // which has revision `last`: revisions then go on from there across restarts.
  void Restore(std::vector<Event> events, uint64_t last) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.assign(std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
    while (events_.size() > window_) events_.pop_front();
    last_ = last;
  }

  uint64_t last_revision() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

  enum class Read { kOk, kCompacted, kClosed };

  // Waits until events after `since` exist (or `timeout` passes, or Close()), then
  // copies them into `out`. kCompacted means some of them are gone from the window.
  Read WaitAfter(uint64_t since, absl::Duration timeout, std::vector<Event>* out) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                 [&] { return closed_ || last_ > since; });
    if (closed_) return Read::kClosed;
    uint64_t first = last_ - events_.size() + 1;
    if (since + 1 < first && last_ > since) return Read::kCompacted;
    for (uint64_t rev = std::max(since + 1, first); rev <= last_; ++rev) {
      out->push_back(events_[rev - first]);
    }
    return Read::kOk;
  }

  // Wakes every watcher for shutdown.
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  const size_t window_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  uint64_t last_ = 0;
  bool closed_ = false;
};

}  // namespace jc
