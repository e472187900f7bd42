#pragma once

// The REST server's threads. cpp-httplib gives each connection a thread for as long as it
// stays open (a keep-alive connection waiting for its next request included), so a fixed
// pool lets idle or slow connections starve real clients: with 8 threads, the 9th
// keep-alive client waited a minute for its first answer. This pool keeps `min` threads
// and adds one whenever a connection arrives and none is free, up to `max`; a thread
// above `min` that has nothing to do for `idle_exit` leaves. Threads are started only
// when the pool grows, never per request. See docs/adr/0007-rest-connection-threads.md.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

#include <httplib.h>

namespace jc::gateway {

class ElasticPool final : public httplib::TaskQueue {
 public:
  ElasticPool(int min_threads, int max_threads, std::chrono::milliseconds idle_exit = std::chrono::seconds(30));
  ~ElasticPool() override;

  void enqueue(std::function<void()> fn) override;
  // As enqueue; false (and `fn` dropped) once the pool is stopping, so that a caller waiting
  // on `fn` knows it will never run, and when `fn` needs a new thread and none can be made
  // (the process's limit on threads): refused, rather than queued behind work that may hold
  // every thread for hours. enqueue queues it then, for a thread that frees up.
  bool TryEnqueue(std::function<void()> fn);
  // Runs what is queued, then stops every thread; returns once they are gone.
  void shutdown() override;

  int threads() const;
  int busy() const;

 private:
  void Work();
  // mu_ held.
  bool Enqueue(std::function<void()> fn, bool refuse_without_thread);

  const int min_, max_;
  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, gone_cv_;
  std::deque<std::function<void()>> queue_;
  int threads_ = 0;  // alive
  int idle_ = 0;     // alive and waiting for work
  bool stopping_ = false;
};

}  // namespace jc::gateway
