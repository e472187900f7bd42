#pragma once

// The resource monitor (standard 6.1.2, SPEC A3): polls every registered center's adapter
// on an interval for its Table 4 usage (and, less often, its center info: specs, power,
// network, performance), keeps the latest observation per center, exports it as
// Prometheus gauges labelled by center, and reports each center that answered to the
// registry as alive. A center whose adapter stops answering gets no heartbeat, so the
// registry's sweep moves it to unknown, then unavailable. Domain logic: no gRPC here.

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/periodic_task.h"
#include "common/thread_pool.h"
#include "jointcloud/v1/monitor.pb.h"
#include "services/southbound/adapter_client.h"
#include "services/registry/center_directory.h"

namespace jc::monitor {

namespace v1 = ::jointcloud::v1;
namespace apb = ::jointcloud::adapter::v1;

struct MonitorOptions {
  absl::Duration interval = absl::Seconds(5);
  absl::Duration call_timeout = absl::Seconds(2);
  // Center info changes rarely: asked again after this long.
  absl::Duration info_refresh = absl::Minutes(1);
  int parallelism = 8;  // adapters polled at once
};

// Everything the monitor knows of one center, for the scheduler's snapshot.
struct CenterObservation {
  v1::Center center;  // the registry's record at the last poll
  apb::Usage usage;
  bool has_usage = false;
  apb::CenterInfo info;
  bool has_info = false;
  absl::Time info_at = absl::InfinitePast();
  absl::Time observed_at = absl::InfinitePast();  // when the last answer was asked for
  bool reachable = false;
  std::string last_error;
  int start_estimates_dropped = 0;  // in the last queue report (BoundQueueReport)
};

// Whether a center's info gives a capacity, and it is nothing at all (every figure 0).
bool HoldsNothing(const apb::CenterInfo& info);

class Monitor {
 public:
  Monitor(registry::CenterDirectory* centers, southbound::AdapterClient* adapters, const Clock* clock, MonitorOptions options);
  ~Monitor();

  // Polls on the interval in a background thread until Stop (or destruction).
  void Start();
  void Stop();

  // One round: every registered center with an adapter address, `parallelism` at a time.
  // Fails only when the registry cannot be listed.
  absl::Status PollOnce();

  // Table 4 of one center; NotFound when it is not registered, or has no adapter to poll.
  absl::StatusOr<v1::CenterUsage> Get(const std::string& id) const;
  std::vector<v1::CenterUsage> List() const;
  std::vector<CenterObservation> Observations() const;

  // Called after every round with every observation (feeds the scheduler's snapshot).
  void OnRound(std::function<void(const std::vector<CenterObservation>&)> listener);

  void EnableMetrics(prometheus::Registry& registry);

 private:
  struct Gauges;
  // Asks one adapter; `o` holds the previous observation and receives the new one.
  void Observe(CenterObservation* o);
  void Export(const std::string& id, const CenterObservation& o);
  void Forget(const std::string& id);

  registry::CenterDirectory* centers_;
  southbound::AdapterClient* adapters_;
  const Clock* clock_;
  MonitorOptions options_;
  ThreadPool pool_;

  mutable std::mutex mu_;
  std::map<std::string, CenterObservation> observations_;
  std::vector<std::function<void(const std::vector<CenterObservation>&)>> listeners_;
  std::unique_ptr<Gauges> gauges_;

  PeriodicTask loop_;
};

// What changed materially in a center's queue report (SPEC A16) from `before` to `after`:
// a spec's wait became known or unknown, or moved by more than half and more than a
// minute; "" when nothing did. For the monitor's log, so a queue that fills or drains
// shows there without a line per poll.
std::string QueueReportChange(const apb::Usage& before, const apb::Usage& after);

// A center's queue report as the monitor takes it (SPEC A16): an adapter is another party,
// and what it says reaches the scheduler's snapshot, REST answers and logs. Kept: entries
// for specs the center's `info` offers (when known; else at most kMaxStartEstimates), each
// spec once (its first), with a printable id of at most kMaxSpecIdLength bytes and a finite,
// non-negative wait, clamped to kMaxStartWait; the source trimmed to printable characters
// and kMaxSourceLength bytes. Returns how many entries were dropped.
inline constexpr int kMaxStartEstimates = 256;
inline constexpr size_t kMaxSpecIdLength = 128;
inline constexpr size_t kMaxSourceLength = 64;
inline constexpr double kMaxStartWaitSeconds = 366.0 * 86400;
int BoundQueueReport(apb::Usage* usage, const apb::CenterInfo* info);

// Table 4 of an observation, as the API serves it.
v1::CenterUsage ToCenterUsage(const std::string& id, const CenterObservation& o);

}  // namespace jc::monitor
