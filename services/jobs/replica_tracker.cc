#include "services/jobs/replica_tracker.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace jc::jobs {

void ReplicaTracker::Restart(uint64_t term, std::map<std::string, uint64_t> committed) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cursors_ = std::move(committed);
  }
  term_ = term;  // open streams see the term change, end, and reconnect from these cursors
}

void ReplicaTracker::Pause() { term_ = 0; }

void ReplicaTracker::Follow(const std::string& center) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || watchers_.count(center)) return;
  watchers_[center] = std::thread([this, center] { WatchLoop(center); });
}

std::set<std::string> ReplicaTracker::Connected() {
  std::lock_guard<std::mutex> lock(mu_);
  return connected_;
}

void ReplicaTracker::Read(std::vector<Ask> asks, Answer answer) {
  pool_->Run([this, asks = std::move(asks), answer = std::move(answer)] {
    for (const Ask& ask : asks) {
      if (stopping_) return;
      auto address = addresses_->Of(ask.center);
      if (!address.ok()) continue;  // asked again at the next poll
      answer(ask, adapters_->Get({ask.center, *address}, ask.key));
    }
  });
}

void ReplicaTracker::Stop() {
  stopping_ = true;
  std::map<std::string, std::thread> watchers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    watchers.swap(watchers_);
  }
  for (auto& [center, w] : watchers) w.join();
}

void ReplicaTracker::WatchLoop(const std::string& center) {
  while (!stopping_) {
    uint64_t term = term_;
    auto address = term != 0 ? addresses_->Of(center) : absl::UnavailableError("not leading");
    if (address.ok()) {
      uint64_t cursor = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        cursor = cursors_[center];
      }
      absl::Status s = adapters_->Watch(
          {center, *address}, cursor,
          [&](const apb::ReplicaEvent& e) {
            {
              std::lock_guard<std::mutex> lock(mu_);
              connected_.insert(center);
              // A reconnect in this term resumes after what was delivered; Restart sets it
              // back to what the store has.
              if (term_ == term) cursors_[center] = std::max(cursors_[center], e.cursor());
            }
            callbacks_.event(center, term, e);
          },
          [this, term] { return stopping_.load() || term_.load() != term; });
      if (absl::IsOutOfRange(s) && !stopping_) {
        // The adapter no longer has the events after our cursor (its log was compacted,
        // or its store was reset): start over from its first event, and read every
        // replica there, so that nothing waits on an event that will not come.
        spdlog::warn("job manager: the event stream of {} cannot resume from cursor {} ({}); reading every replica "
                     "there and watching from the start",
                     center, cursor, std::string(s.message()));
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (term_ == term) cursors_[center] = 0;
        }
        callbacks_.resync(center, term);
      } else if (!s.ok() && !stopping_) {
        spdlog::debug("job manager: watch of {}: {}", center, s.ToString());
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      connected_.erase(center);
    }
    // Reconnect after a pause; the cursor makes the adapter replay what was missed.
    for (int i = 0; i < 10 && !stopping_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace jc::jobs
