#pragma once

// One outbox per destination (a center's adapter for the job manager, a host's agent for
// the nexec master): what is sent to a destination queues while its senders are busy, and
// each sender takes what queued as one batch — one item at low load (so batching adds no
// latency), many under a burst (so a burst costs few calls). How many senders a
// destination gets: one per full batch waiting plus one, so that a lone item never waits
// behind a call in flight, up to `max_senders` (one keeps a destination's calls in order).
// Thread-safe; it never calls out, so callers may hold their own locks while adding.

#include <algorithm>
#include <cstddef>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace jc {

template <typename Item>
class Outboxes {
 public:
  // What an item weighs in a call (its encoded size).
  using SizeOf = std::function<size_t(const Item&)>;

  // `max_batch`: the most items one Take returns (0: no limit). `max_bytes` (with
  // `size_of`): the most one Take returns by weight, but always at least one item — a
  // call has a most it may carry (gRPC's 4 MiB), and a batch past it fails every item in
  // it, again each time it is sent.
  Outboxes(size_t max_batch, int max_senders, size_t max_bytes = 0, SizeOf size_of = nullptr)
      : max_batch_(max_batch == 0 ? std::numeric_limits<size_t>::max() : max_batch),
        max_senders_(std::max(1, max_senders)),
        max_bytes_(size_of == nullptr || max_bytes == 0 ? std::numeric_limits<size_t>::max() : max_bytes),
        size_of_(std::move(size_of)) {}

  // Queues `item` for `destination`. True when the caller must start a sender for it
  // (the sender then calls Take until it returns nothing).
  bool Add(const std::string& destination, Item item) {
    std::lock_guard<std::mutex> lock(mu_);
    Box& box = boxes_[destination];
    box.pending.push_back(std::move(item));
    return StartSenderLocked(box);
  }

  // Queues several items; returns the destinations to start a sender for (one entry per
  // sender to start).
  std::vector<std::string> AddAll(std::vector<std::pair<std::string, Item>> items) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> touched;  // usually one or two: not every destination
    for (auto& [destination, item] : items) {
      boxes_[destination].pending.push_back(std::move(item));
      if (std::find(touched.begin(), touched.end(), destination) == touched.end()) touched.push_back(destination);
    }
    std::vector<std::string> start;
    for (const auto& destination : touched) {
      if (StartSenderLocked(boxes_[destination])) start.push_back(destination);
    }
    return start;
  }

  // A sender's next batch, oldest first. Empty when nothing waits: the sender is done
  // (its slot is released) and must not call again.
  std::vector<Item> Take(const std::string& destination) {
    std::lock_guard<std::mutex> lock(mu_);
    Box& box = boxes_[destination];
    std::vector<Item> batch;
    size_t bytes = 0;
    while (!box.pending.empty() && batch.size() < max_batch_) {
      if (size_of_ != nullptr) {
        const size_t weight = size_of_(box.pending.front());
        if (!batch.empty() && weight > max_bytes_ - std::min(bytes, max_bytes_)) break;
        bytes += weight;
      }
      batch.push_back(std::move(box.pending.front()));
      box.pending.pop_front();
    }
    if (batch.empty()) --box.senders;
    return batch;
  }

  // Drops everything queued (senders find nothing more and end).
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [destination, box] : boxes_) box.pending.clear();
  }

  size_t Pending(const std::string& destination) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = boxes_.find(destination);
    return it == boxes_.end() ? 0 : it->second.pending.size();
  }

 private:
  struct Box {
    std::deque<Item> pending;
    int senders = 0;
  };

  bool StartSenderLocked(Box& box) {
    if (box.pending.empty()) return false;
    size_t full_batches = max_batch_ == std::numeric_limits<size_t>::max() ? 0 : (box.pending.size() - 1) / max_batch_;
    size_t wanted = std::min<size_t>(static_cast<size_t>(max_senders_), 2 + full_batches);
    if (static_cast<size_t>(box.senders) >= wanted) return false;
    ++box.senders;
    return true;
  }

  const size_t max_batch_;
  const int max_senders_;
  const size_t max_bytes_;
  const SizeOf size_of_;
  std::mutex mu_;
  std::map<std::string, Box> boxes_;
};

}  // namespace jc
