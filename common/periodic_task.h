#pragma once

// Runs a function now and then every `interval` on its own thread until stopped; Stop
// wakes it at once instead of waiting out the interval. For background loops (the
// monitor's polls, the scheduler's refresh).

#include <pthread.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/time/time.h"

namespace jc {

class PeriodicTask {
 public:
  PeriodicTask() = default;
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;
  ~PeriodicTask() { Stop(); }

  // `name`: the thread's, as top -H and perf show it (at most 15 characters).
  void Start(absl::Duration interval, std::function<void()> fn, const std::string& name = "") {
    thread_ = std::thread([this, interval, fn = std::move(fn), name] {
      if (!name.empty()) pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
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
