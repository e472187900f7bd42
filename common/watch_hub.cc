#include "common/watch_hub.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace jc {

WatchHub::WatchHub(WatchHubOptions options, prometheus::Registry* metrics) : options_(options) {
  if (metrics != nullptr) {
    open_gauge_ = &prometheus::BuildGauge()
                       .Name("jc_watch_streams_open")
                       .Help("Watch streams open on this server (WatchTrainJobs, WatchCenters, REST event streams)")
                       .Register(*metrics)
                       .Add({});
    refused_ = &prometheus::BuildCounter()
                    .Name("jc_watch_streams_refused_total")
                    .Help("Watch streams refused because their caller already held its limit of open streams")
                    .Register(*metrics)
                    .Add({});
  }
  thread_ = std::thread([this] { Run(); });
}

WatchHub::~WatchHub() { Stop(); }

absl::StatusOr<std::unique_ptr<WatchHub::Seat>> WatchHub::Admit(const std::string& caller, bool counted,
                                                                const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (counted) {
    int& held = seats_[caller];
    if (options_.per_caller > 0 && held >= options_.per_caller) {
      if (held == 0) seats_.erase(caller);
      if (refused_ != nullptr) refused_->Increment();
      return absl::ResourceExhaustedError(absl::StrCat(
          caller, " already has ", held, " watch streams open, the most one caller may hold (--max_watches_per_caller); ",
          "close one before opening ", what));
    }
    ++held;
    ++seated_;
    return std::make_unique<Seat>(this, caller);
  }
  return std::make_unique<Seat>(this, std::string());
}

void WatchHub::Leave(const std::string& caller) {
  if (caller.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seats_.find(caller);
  if (it == seats_.end()) return;
  --seated_;
  if (--it->second <= 0) seats_.erase(it);
}

void WatchHub::Add(std::shared_ptr<Stream> stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(stream);  // opens at once, without pumping every other stream
    streams_.push_back(std::move(stream));
    if (open_gauge_ != nullptr) open_gauge_->Set(static_cast<double>(streams_.size()));
  }
  cv_.notify_one();
}

void WatchHub::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

void WatchHub::Ready(std::weak_ptr<Stream> stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(std::move(stream));
  }
  cv_.notify_one();
}

void WatchHub::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

size_t WatchHub::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

void WatchHub::Run() {
  std::vector<std::shared_ptr<Stream>> round;
  std::unique_lock<std::mutex> lock(mu_);
  absl::Time next_tick = absl::Now() + options_.tick;
  while (!stopping_) {
    cv_.wait_until(lock, absl::ToChronoTime(next_tick), [&] { return stopping_ || woken_ || !ready_.empty(); });
    if (stopping_) break;
    absl::Time now = absl::Now();
    // Everyone on a tick or a new event; otherwise only the streams that asked (a write
    // finished): a thousand writes finishing must not pump a thousand streams each.
    if (woken_ || now >= next_tick) {
      round = streams_;
      if (now >= next_tick) next_tick = now + options_.tick;
    } else {
      for (auto& weak : ready_) {
        if (auto stream = weak.lock()) round.push_back(std::move(stream));
      }
    }
    woken_ = false;
    ready_.clear();
    lock.unlock();
    // Not under the lock: a stream's write may complete at once and call Ready from here.
    absl::flat_hash_set<const Stream*> over;
    for (const auto& stream : round) {
      if (!stream->Pump(now)) over.insert(stream.get());
    }
    round.clear();
    lock.lock();
    if (!over.empty()) {
      // Destroyed after the lock is let go: the last reference to a stream may be this one,
      // and a stream that still held its seat would leave through mu_ (helper-73; Done()
      // gives the seat up first today, which is all that kept this from deadlocking).
      std::vector<std::shared_ptr<Stream>> ended;
      for (const auto& s : streams_) {
        if (over.contains(s.get())) ended.push_back(s);
      }
      std::erase_if(streams_, [&](const std::shared_ptr<Stream>& s) { return over.contains(s.get()); });
      if (open_gauge_ != nullptr) open_gauge_->Set(static_cast<double>(streams_.size()));
      lock.unlock();
      ended.clear();
      lock.lock();
    }
  }
}

}  // namespace jc
