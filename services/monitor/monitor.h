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
};

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

// Table 4 of an observation, as the API serves it.
v1::CenterUsage ToCenterUsage(const std::string& id, const CenterObservation& o);

}  // namespace jc::monitor
