#pragma once

// A named lease in the store: at most one holder at a time. The holder renews it well
// within its time to live; another instance takes it only once it has expired (its holder
// died or lost the store) or was released. Instances sharing one PostgreSQL use it so
// that one job manager dispatches while the others stand by (see docs/operations.md).
// Expiry uses each instance's clock: keep them in sync (NTP) to well under the TTL.

#include <atomic>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/store/store.h"

namespace jc::store {

class Lease {
 public:
  Lease(Store* store, std::string name, std::string holder, absl::Duration ttl)
      : store_(store), name_(std::move(name)), holder_(std::move(holder)), ttl_(ttl) {}

  // Takes the lease when it is free or expired, or renews it when this holder has it.
  // True when this holder holds it until now + ttl. `new_term`: a new holding begins (a
  // process taking the lease, even one that restarted under the same holder name before
  // its predecessor's hold ended), so the term goes up; otherwise it goes up only when the
  // lease changes hands or was taken again after it ended.
  absl::StatusOr<bool> TryAcquire(absl::Time now, bool new_term = false);
  // The current holder ("" when nobody holds it) and when its hold ends.
  absl::StatusOr<std::pair<std::string, absl::Time>> Current() const;
  // The lease's term as the store has it now (0: never taken), whoever holds it.
  absl::StatusOr<int64_t> CurrentTerm() const;
  // Inside `txn`: Unavailable unless this holder holds the lease at `now`. Writes that
  // only the holder may make run it first (a fence), so an instance that lost the lease
  // while it was stalled cannot write on as if it still led. While this holder renewed
  // the lease less than half its TTL ago, nobody else can hold it (clocks agree to well
  // under the TTL), and the check costs no query; past that (renewals failing, or the
  // process was paused) it asks the store.
  absl::Status CheckHeld(Transaction& txn, absl::Time now) const;
  // Gives the lease up, so a standby takes over at once instead of after the TTL.
  absl::Status Release();

  const std::string& holder() const { return holder_; }
  const std::string& name() const { return name_; }
  // The lease's term as of this holder's last successful TryAcquire (0: none yet): counted
  // up each time the lease changes hands or is taken again after it ended.
  int64_t term() const { return term_; }
  absl::Duration ttl() const { return ttl_; }

 private:
  Store* store_;
  std::string name_;
  std::string holder_;
  absl::Duration ttl_;
  // When this holder's hold ends by its last successful TryAcquire (unix micros; 0: never).
  std::atomic<int64_t> held_until_micros_{0};
  std::atomic<int64_t> term_{0};
};

}  // namespace jc::store
