#include "services/gateway/elastic_pool.h"

#include <pthread.h>

#include <algorithm>
#include <system_error>
#include <thread>

namespace jc::gateway {

ElasticPool::ElasticPool(int min_threads, int max_threads, std::chrono::milliseconds idle_exit)
    : min_(std::max(1, min_threads)), max_(std::max(std::max(1, min_threads), max_threads)), idle_exit_(idle_exit) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < min_; ++i) {
    ++threads_;
    std::thread([this] { Work(); }).detach();
  }
}

ElasticPool::~ElasticPool() { shutdown(); }

void ElasticPool::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  Enqueue(std::move(fn), /*refuse_without_thread=*/false);
}

bool ElasticPool::TryEnqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  return Enqueue(std::move(fn), /*refuse_without_thread=*/true);
}

bool ElasticPool::Enqueue(std::function<void()> fn, bool refuse_without_thread) {
  if (stopping_) return false;
  queue_.push_back(std::move(fn));
  // Every queued connection that no idle thread will take gets a thread of its own.
  if (static_cast<int>(queue_.size()) > idle_ && threads_ < max_) {
    try {
      std::thread([this] { Work(); }).detach();  // it waits for mu_, held here
      ++threads_;
    } catch (const std::system_error&) {
      // No thread to be had: an attacker's flood must not abort the process (std::terminate
      // from the acceptor's thread took the whole control plane down).
      if (refuse_without_thread) {
        queue_.pop_back();
        return false;
      }
    }
  }
  work_cv_.notify_one();
  return true;
}

void ElasticPool::shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  work_cv_.notify_all();
  gone_cv_.wait(lock, [&] { return threads_ == 0; });
}

int ElasticPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_;
}

int ElasticPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_ - idle_;
}

void ElasticPool::Work() {
  // Named for top -H and perf: a connection's thread, told apart from gRPC's and the loops'.
  pthread_setname_np(pthread_self(), "jc-rest");
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    bool woke = work_cv_.wait_for(lock, idle_exit_, [&] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty() && (stopping_ || (!woke && threads_ > min_))) break;  // done, or idle too long
    if (queue_.empty()) continue;
    std::function<void()> fn = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
  if (--threads_ == 0) gone_cv_.notify_all();
}

}  // namespace jc::gateway
