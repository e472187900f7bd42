#pragma once

// Connections whose request head has not fully arrived, read on one thread (epoll): each
// holds a socket and a buffer of at most kMaxHeadBytes while it waits, no thread. A client
// that opens sockets and sends nothing (or a byte now and then) therefore costs the
// listener nothing it cannot afford; only a complete head is handed on to a thread.
//
// Bounded two ways: a head must complete within `timeout`, and at most `capacity` wait at
// once; when a new connection would pass that, the one that has waited longest is dropped.
// A client whose head arrives within a round trip is never the oldest, so a flood of silent
// sockets evicts itself — from one address or from many, and behind a proxy that gives
// every caller the same address too.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>

#include "absl/time/time.h"

namespace jc::endpoints {

class HeadGatherer {
 public:
  enum class Outcome {
    kComplete,  // `bytes` holds the head (HeadEnd) and whatever followed it
    kTooLarge,  // over kMaxHeadBytes before the head ended
    kTimedOut,
    kGone,      // the peer closed or reset before the head ended
    kEvicted,   // the oldest, when a newer one needed the place
  };
  // Told once per connection added, with its socket, which it owns from then on.
  using Done = std::function<void(int fd, const std::string& address, std::string bytes, Outcome outcome)>;

  // `watch_fd` (the listening socket) is polled beside the connections; -1 for none.
  HeadGatherer(size_t capacity, absl::Duration timeout, int watch_fd, Done done);
  ~HeadGatherer();  // closes the connections still waiting
  HeadGatherer(const HeadGatherer&) = delete;
  HeadGatherer& operator=(const HeadGatherer&) = delete;

  // Takes `fd` (non-blocking from now on) to wait for its head.
  void Add(int fd, std::string address);
  // Waits up to `wait` for bytes, reads what came, tells Done of heads completed and of
  // connections that ran out of time. True when `watch_fd` is readable.
  bool Poll(absl::Duration wait);
  // Drops the connection that has waited longest (Done is told kEvicted): a descriptor for
  // a new one when the process has none left. False when none waits.
  bool EvictOldest();
  size_t waiting() const { return waiting_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  struct Waiting {
    int fd;
    std::string address;
    std::string bytes;
    std::chrono::steady_clock::time_point deadline;  // a step of the wall clock moves none
  };
  void Finish(uint64_t id, Outcome outcome);
  void Read(uint64_t id);

  size_t capacity_;
  std::chrono::nanoseconds timeout_;
  int watch_fd_;
  Done done_;
  int epoll_fd_ = -1;
  uint64_t next_id_ = 1;  // 0 stands for watch_fd
  std::map<uint64_t, Waiting> waiting_;
  std::deque<uint64_t> by_age_;  // ids in the order added; those finished are skipped
};

}  // namespace jc::endpoints
