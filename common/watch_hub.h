#pragma once

// The open watch streams of a server (WatchTrainJobs, WatchCenters), driven by one thread
// instead of holding a request thread each. A synchronous gRPC handler that waits for the
// next event keeps one of the server's request threads for as long as the stream is open:
// 70 open job streams once held all 64 and every other call of the federation got 429
// until they closed. Streams run on gRPC's callback API (common/watch_call.h) and this hub
// pumps them: when something new was published (Wake), after a stream finished a write,
// and every `tick` (heartbeats, events another instance wrote). A stream never blocks a
// gRPC thread; what it reads without waiting is read here.
//
// The hub also holds each caller to `per_caller` open streams (RESOURCE_EXHAUSTED, which
// REST answers 429, past it: for that caller only). Jointcloud's own services are not
// counted.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace jc {

struct WatchHubOptions {
  int per_caller = 32;                        // open streams one caller may hold; 0: no limit
  absl::Duration tick = absl::Milliseconds(250);
};

class WatchHub {
 public:
  // What the hub drives: one open stream.
  class Stream {
   public:
    virtual ~Stream() = default;
    // Runs on the hub's thread: moves the stream on without waiting (reads what is new,
    // starts a write, sends a heartbeat, ends it). False once the stream is over: the hub
    // forgets it.
    virtual bool Pump(absl::Time now) = 0;
  };

  // The caller's place among the open streams: released when destroyed.
  class Seat {
   public:
    Seat(WatchHub* hub, std::string caller) : hub_(hub), caller_(std::move(caller)) {}
    ~Seat() { hub_->Leave(caller_); }
    Seat(const Seat&) = delete;
    Seat& operator=(const Seat&) = delete;

   private:
    WatchHub* hub_;
    std::string caller_;
  };

  explicit WatchHub(WatchHubOptions options = {}, prometheus::Registry* metrics = nullptr);
  ~WatchHub();  // Stop()
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // A seat for a stream of `caller` (`counted`: false for Jointcloud's own services);
  // RESOURCE_EXHAUSTED when the caller already holds `per_caller` of them, naming how many.
  absl::StatusOr<std::unique_ptr<Seat>> Admit(const std::string& caller, bool counted, const std::string& what);

  void Add(std::shared_ptr<Stream> stream);
  // Pump every stream soon: a new event committed.
  void Wake();
  // Pump this one soon: it finished its writes, or its call was cancelled or is done.
  void Ready(std::weak_ptr<Stream> stream);
  // Ends the thread. Streams still open are no longer pumped: call after the gRPC server
  // shut down (its calls were cancelled and finished by then).
  void Stop();

  size_t open() const;

 private:
  void Run();
  void Leave(const std::string& caller);

  const WatchHubOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Stream>> streams_;
  std::vector<std::weak_ptr<Stream>> ready_;  // to pump, when not all are
  absl::flat_hash_map<std::string, int> seats_;  // caller -> open streams
  int seated_ = 0;                                // all counted seats
  bool woken_ = false;
  bool stopping_ = false;
  prometheus::Gauge* open_gauge_ = nullptr;
  prometheus::Counter* refused_ = nullptr;
  std::thread thread_;
};

}  // namespace jc
