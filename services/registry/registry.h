#pragma once

// The center registry (standard 6.1.1, Tables 1-2) and its health-derived status
// (6.5 elastic awareness). Domain logic only: no gRPC types here.

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <google/protobuf/field_mask.pb.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/event_log.h"
#include "common/store/store.h"
#include "jointcloud/v1/registry.pb.h"
#include "services/registry/adapter_keys.h"

namespace jc::registry {

namespace v1 = ::jointcloud::v1;

inline constexpr int kUnavailable = 0;
inline constexpr int kAvailable = 1;
inline constexpr int kUnknown = 2;

struct RegistryOptions {
  // No heartbeat for this long: available -> unknown.
  absl::Duration unknown_after = absl::Seconds(30);
  // No heartbeat for this long: -> unavailable.
  absl::Duration unavailable_after = absl::Seconds(90);
  // After a center is issued a new adapter key, its old key still proves it this long:
  // time to give the adapter the new one without an outage.
  absl::Duration adapter_key_grace = absl::Hours(1);
};

// Checks a center as a client sent it (create, or the result of an update).
absl::Status ValidateCenter(const v1::Center& center);

class Registry {
 public:
  Registry(store::Store* store, const Clock* clock, RegistryOptions options);

  absl::StatusOr<v1::Center> Create(v1::Center center);
  absl::StatusOr<v1::Center> Get(const std::string& id);
  absl::StatusOr<v1::Center> Update(const v1::Center& patch,
                                    const google::protobuf::FieldMask& mask);
  absl::Status Delete(const std::string& id);
  // Writes the capacity history (center_capacity) of centers registered before it was kept;
  // called once at start. Each registration, capacity change and removal writes its own.
  absl::Status BackfillCapacityHistory();
  absl::StatusOr<v1::ListCentersResponse> List(const v1::ListCentersRequest& request);

  // A new adapter key for the center (issue 44, hole 5); the center is marked
  // adapter_key_issued and watchers see it UPDATED.
  absl::StatusOr<IssuedAdapterKey> IssueAdapterKey(const std::string& id);

  // Records a sign of life; returns the center's status afterwards.
  absl::StatusOr<int> Heartbeat(const std::string& id, bool healthy);

  // Moves centers whose heartbeats stopped to unknown, then unavailable. Called
  // periodically by the server; returns how many centers changed.
  absl::StatusOr<int> SweepHealth();

  // How many centers have each status: index 0 unavailable, 1 available, 2 unknown.
  absl::StatusOr<std::array<int, 3>> CountByStatus();

  EventLog<v1::CenterEvent>& events() { return events_; }

 private:
  absl::StatusOr<v1::Center> SetStatus(const std::string& id, int status);
  void Publish(v1::CenterEvent::Type type, const v1::Center& center, int previous_status);

  store::Store* store_;
  const Clock* clock_;
  RegistryOptions options_;
  EventLog<v1::CenterEvent> events_;

  std::mutex mu_;
  // Last heartbeat per center. In memory on purpose: after a restart every center gets
  // a fresh grace period instead of being judged by a clock that was not running.
  std::map<std::string, absl::Time> last_seen_;
  absl::Time started_;
};

}  // namespace jc::registry
