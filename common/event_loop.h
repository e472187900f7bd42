#pragma once

// An actor's mailbox and the one thread that reads it (the manner of Mesos's libprocess:
// a component's state is touched only by closures posted to its loop, so it needs no lock
// and no thread ever waits on another's lock). The loop takes everything posted so far,
// runs it in order, then calls `after_burst` once: a component collects the writes of a
// whole burst of messages there and hands them on as one batch.
//
// Post never blocks (it only queues) and may be called from any thread, the loop's own
// included; after Stop it drops what it is given.

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace jc {

class EventLoop {
 public:
  EventLoop() = default;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop() { Stop(); }

  // `name` (at most 15 characters) shows in top -H and perf.
  void Start(const char* name, std::function<void()> after_burst = nullptr) {
    after_burst_ = std::move(after_burst);
    thread_ = std::thread([this, name] {
      pthread_setname_np(pthread_self(), name);
      Run();
    });
  }

  // Stops after the closure under way; what is still queued is dropped (destroyed on this
  // thread, so whoever waits on a reply inside one sees it abandoned).
  void Stop() {
    std::deque<std::function<void()>> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(queue_);
  }

  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

  bool InLoop() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Run() {
    std::deque<std::function<void()>> burst;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      burst.swap(queue_);
      lock.unlock();
      for (auto& fn : burst) fn();
      burst.clear();
      if (after_burst_) after_burst_();
      lock.lock();
    }
  }

  std::function<void()> after_burst_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace jc
