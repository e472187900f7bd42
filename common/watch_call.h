#pragma once

// One watch stream on gRPC's callback API, driven by a WatchHub (common/watch_hub.h): what
// a synchronous handler did with a loop of "read, write, wait" on a request thread. The
// stream's content comes from a WatchFeed; this file only moves it: at most one write in
// flight, heartbeats after a quiet interval, the end when the feed says so, a cancelled
// call finished at once.
//
// Who acts when: the hub's thread runs Pump while no write is in flight (it reads the
// feed, then starts a write or finishes); gRPC's thread runs OnWriteDone, which starts
// the next queued write or hands the stream back to the hub. OnCancel only marks the
// call and wakes the hub. So Finish is called once, by whoever holds the stream then, and
// never while a write is in flight.

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_callback.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/watch_hub.h"

namespace jc {

template <typename Event>
class WatchFeed {
 public:
  virtual ~WatchFeed() = default;
  // On the hub, before anything is sent: the caller's checks and what the stream starts
  // with (a snapshot, the events after its cursor). An error is the call's status, sent
  // before any header, so a gateway in front tells a refusal from an accepted watch.
  // `*end`: the stream ends after `first`.
  virtual absl::Status Open(std::vector<Event>* first, bool* end) = 0;
  // What is new, without waiting. `*end`: the stream ends after `out`.
  virtual absl::Status Next(std::vector<Event>* out, bool* end) = 0;
  // A heartbeat after this long without a write; zero: none.
  virtual absl::Duration heartbeat() const { return absl::ZeroDuration(); }
  virtual Event Heartbeat() { return Event(); }
};

template <typename Event>
class WatchCall final : public WatchHub::Stream, public std::enable_shared_from_this<WatchCall<Event>> {
 public:
  // Starts a watch for the call `ctx`; the reactor is what the callback handler returns.
  // `seat` (WatchHub::Admit) is held until the call is done.
  static grpc::ServerWriteReactor<Event>* Start(WatchHub* hub, grpc::CallbackServerContext* ctx,
                                                std::unique_ptr<WatchFeed<Event>> feed,
                                                std::unique_ptr<WatchHub::Seat> seat) {
    auto call = std::shared_ptr<WatchCall>(new WatchCall(hub, ctx, std::move(feed), std::move(seat)));
    auto* reactor = new Reactor(call);
    call->reactor_ = reactor;
    hub->Add(std::move(call));
    return reactor;
  }

  // A call refused before it started (its caller, its limit of streams).
  static grpc::ServerWriteReactor<Event>* Refuse(const grpc::Status& status) { return new Refused(status); }

  bool Pump(absl::Time now) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (done_) return false;
    if (finished_ || writing_) return true;
    if (cancelled_) return Finish(lock, grpc::Status::CANCELLED);
    // No write is in flight and only this thread finishes: the feed is read unlocked,
    // so gRPC's threads never wait on it.
    bool opening = !opened_;
    bool read = opening || (pending_.empty() && !end_after_);
    lock.unlock();
    std::vector<Event> got;
    bool end = false;
    absl::Status status = absl::OkStatus();
    if (opening) {
      status = feed_->Open(&got, &end);
    } else if (read) {
      status = feed_->Next(&got, &end);
    }
    if (opening && status.ok()) {
      // Headers go out now: a REST gateway in front knows the watch was accepted.
      ctx_->AddInitialMetadata("jc-watch", "accepted");
      reactor_->StartSendInitialMetadata();
      last_write_ = now;
    }
    lock.lock();
    if (!status.ok()) return Finish(lock, ToGrpcStatus(status));
    opened_ = true;
    for (auto& event : got) pending_.push_back(std::move(event));
    end_after_ = end_after_ || end;
    absl::Duration heartbeat = feed_->heartbeat();
    if (pending_.empty() && !end_after_ && heartbeat > absl::ZeroDuration() && now - last_write_ >= heartbeat) {
      pending_.push_back(feed_->Heartbeat());
    }
    return Advance(lock, now);
  }

 private:
  class Reactor final : public grpc::ServerWriteReactor<Event> {
   public:
    explicit Reactor(std::shared_ptr<WatchCall> call) : call_(std::move(call)) {}
    void OnWriteDone(bool ok) override { call_->WriteDone(ok); }
    void OnCancel() override { call_->Cancelled(); }
    void OnDone() override {
      call_->Done();
      delete this;
    }

   private:
    std::shared_ptr<WatchCall> call_;
  };

  class Refused final : public grpc::ServerWriteReactor<Event> {
   public:
    explicit Refused(const grpc::Status& status) { this->Finish(status); }
    void OnDone() override { delete this; }
  };

  WatchCall(WatchHub* hub, grpc::CallbackServerContext* ctx, std::unique_ptr<WatchFeed<Event>> feed,
            std::unique_ptr<WatchHub::Seat> seat)
      : hub_(hub), ctx_(ctx), feed_(std::move(feed)), seat_(std::move(seat)) {}

  // With `lock` held and no write in flight: starts the next write, or finishes.
  bool Advance(std::unique_lock<std::mutex>& lock, absl::Time now) {
    if (cancelled_) return Finish(lock, grpc::Status::CANCELLED);
    if (!pending_.empty()) {
      current_ = std::move(pending_.front());
      pending_.pop_front();
      writing_ = true;
      last_write_ = now;
      lock.unlock();
      reactor_->StartWrite(&current_);  // may complete (OnWriteDone) before it returns
      return true;
    }
    if (end_after_) return Finish(lock, grpc::Status::OK);
    return true;
  }

  bool Finish(std::unique_lock<std::mutex>& lock, const grpc::Status& status) {
    finished_ = true;
    lock.unlock();
    reactor_->Finish(status);  // may call OnDone before it returns
    return true;
  }

  void WriteDone(bool ok) {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) cancelled_ = true;  // the client is gone
    if (!pending_.empty() || cancelled_ || end_after_) {
      Advance(lock, absl::Now());
      return;
    }
    lock.unlock();
    hub_->Ready(this->weak_from_this());  // idle: the hub reads what came meanwhile
  }

  void Cancelled() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    hub_->Ready(this->weak_from_this());
  }

  void Done() {
    std::unique_ptr<WatchHub::Seat> seat;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      seat = std::move(seat_);
    }
    hub_->Ready(this->weak_from_this());  // the hub forgets the call
  }

  WatchHub* const hub_;
  grpc::CallbackServerContext* const ctx_;
  const std::unique_ptr<WatchFeed<Event>> feed_;
  Reactor* reactor_ = nullptr;  // valid until done_

  std::mutex mu_;
  std::unique_ptr<WatchHub::Seat> seat_;
  std::deque<Event> pending_;
  Event current_;  // the write in flight
  absl::Time last_write_;
  bool opened_ = false;
  bool writing_ = false;
  bool end_after_ = false;  // finish once pending_ is written
  bool cancelled_ = false;
  bool finished_ = false;
  bool done_ = false;
};

}  // namespace jc
