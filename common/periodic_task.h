#pragma once

// Runs a function now and then every `interval` on its own thread until stopped; Stop
// wakes it at once instead of waiting out the interval. For background loops (the
// monitor's polls, the scheduler's refresh).

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace jc {

class PeriodicTask {
 public:
  PeriodicTask() = default;
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;
  ~PeriodicTask() { Stop(); }

  void Start(absl::Duration interval, std::function<void()> fn) {
    thread_ = std::thread([this, interval, fn = std::move(fn)] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!stopping_) {
        lock.unlock();
        fn();
        lock.lock();
        cv_.wait_for(lock, absl::ToChronoNanoseconds(interval), [&] { return stopping_; });
      }
    });
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace jc
