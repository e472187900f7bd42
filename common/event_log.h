#pragma once

// A bounded, in-memory log of events with increasing revisions, for server-streaming
// watches: a watcher replays what it missed (if still in the window) and then waits for
// more. The same shape as etcd's watch: a revision that fell out of the window is
// reported so the watcher can start over from a fresh snapshot.

#include <condition_variable>
#include <cstdint>
#include <algorithm>
#include <deque>
#include <functional>
#include <iterator>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace jc {

// Revisions only grow, and may leave gaps (a revision taken for a write that did not
// commit); AppendStamped and RestoreStamped take events with `revision()`.
template <typename Event>
class EventLog {
 public:
  explicit EventLog(size_t window = 4096) : window_(window) {}

  // Stamps the event with the next revision (via `set_revision`) and appends it.
  uint64_t Append(Event event, const std::function<void(Event&, uint64_t)>& set_revision) {
    uint64_t rev;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rev = ++last_;
      set_revision(event, rev);
      PushLocked(rev, std::move(event));
      cv_.notify_all();
    }
    Told();
    return rev;
  }

  // Append for each of `events` in order, under one lock: a reader sees all of them or none
  // (a group commit's events go to a watcher together, WatchBatches' one message).
  void AppendAll(std::vector<Event> events, const std::function<void(Event&, uint64_t)>& set_revision) {
    if (events.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& event : events) {
        const uint64_t rev = ++last_;
        set_revision(event, rev);
        PushLocked(rev, std::move(event));
      }
      cv_.notify_all();
    }
    Told();
  }

  // Called after every append, on the appending thread and without the log's lock: what
  // drives streams that do not wait on the log (WatchHub::Wake). Set before appends start.
  void SetListener(std::function<void()> listener) { listener_ = std::move(listener); }

  // Appends events that already carry their revisions (each above every earlier one):
  // those a store numbered as it committed them.
  void AppendStamped(std::vector<Event> events) {
    if (events.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& event : events) {
        if (event.revision() <= last_) continue;
        last_ = event.revision();
        PushLocked(last_, std::move(event));
      }
      cv_.notify_all();
    }
    Told();
  }

  // Starts the log over from events that were persisted (oldest first), the last of
  // which has revision `last` and the others the ones before it: revisions then go on from
  // there across restarts.
  void Restore(std::vector<Event> events, uint64_t last) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.clear();
    floor_ = last - std::min<uint64_t>(last, events.size());
    uint64_t rev = floor_;
    for (auto& event : events) PushLocked(++rev, std::move(event));
    last_ = last;
    cv_.notify_all();
  }

  // The same for events that carry their revisions (`revision()`; gaps allowed): the
  // newest a store kept, oldest first.
  void RestoreStamped(std::vector<Event> events, uint64_t last) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.clear();
    floor_ = events.empty() ? last : events.front().revision() - 1;
    for (auto& event : events) {
      uint64_t rev = event.revision();
      PushLocked(rev, std::move(event));
    }
    last_ = last;
    cv_.notify_all();
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
    // A zero timeout does not wait at all (a wait_for of zero still sleeps in the kernel
    // and switches threads: what a hub polling a thousand streams cannot pay).
    if (timeout > absl::ZeroDuration()) {
      cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return closed_ || last_ > since; });
    }
    if (closed_) return Read::kClosed;
    if (last_ <= since) return Read::kOk;
    if (since < floor_) return Read::kCompacted;
    auto first = std::partition_point(events_.begin(), events_.end(),
                                      [since](const auto& e) { return e.first <= since; });
    for (auto it = first; it != events_.end(); ++it) out->push_back(it->second);
    return Read::kOk;
  }

  // Wakes every watcher for shutdown.
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  void Told() {
    if (listener_) listener_();
  }

  void PushLocked(uint64_t revision, Event event) {
    events_.emplace_back(revision, std::move(event));
    if (events_.size() > window_) {
      floor_ = events_.front().first;
      events_.pop_front();
    }
  }

  const size_t window_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, Event>> events_;  // by revision
  uint64_t last_ = 0;
  // Every event after `floor_` is in `events_`.
  uint64_t floor_ = 0;
  bool closed_ = false;
  std::function<void()> listener_;
};

}  // namespace jc
