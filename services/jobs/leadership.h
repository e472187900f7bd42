#pragma once

// The job manager's leadership: the "jobs" lease in the store. Instances sharing a store
// take turns: one leads (places, dispatches, writes), the others stand by and take over
// when its lease ends. Runs on the job manager's cycle thread only (not thread-safe); the
// store calls it makes never hold up the event loop.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/store/lease.h"

namespace jc::jobs {

class Leadership {
 public:
  Leadership(store::Store* store, std::string instance_id, absl::Duration ttl)
      : lease_(store, "jobs", std::move(instance_id), ttl) {}

  const store::Lease& lease() const { return lease_; }

  // Standing by: takes the lease when it is free or already ours. True: ours, lead now.
  // False with `why` set: another instance holds it, or the store did not answer. At most
  // one try every half second (or quarter TTL).
  bool Take(absl::Time now, std::string* why);
  // Leading: renews the lease every quarter of its TTL. An error says the lease is lost
  // (another instance took it, or it could not be renewed within its TTL): stop acting.
  absl::Status Keep(absl::Time now);
  // Leading ends (a clean stop): gives the lease up so a standby takes over at once.
  void Release();

 private:
  store::Lease lease_;
  absl::Time renewed_ = absl::InfinitePast();
  absl::Time next_try_ = absl::InfinitePast();
};

}  // namespace jc::jobs
