#pragma once

// Leadership through a lease in the store, shared by the services that run several
// instances on one store and let one act: the job manager (the "jobs" lease) and the nexec
// master (the "nexec_master" lease). One instance leads (places, dispatches, writes), the
// others stand by and take over when its lease ends. Not thread-safe: one thread of the
// owner calls it (the job manager's cycle thread, the nexec master's lease thread); the
// store calls it makes never hold up an event loop.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/store/lease.h"

namespace jc::store {

class Leadership {
 public:
  // `act_within`: the longest the leader acts on without a renewal that committed (Keep
  // fails past it). The lease's TTL by default (its writes are fenced by the lease anyway);
  // less where the leader acts outside the store too (the nexec master's calls to agents),
  // so that it has stopped before a standby can take the lease. `what` names the lease in
  // messages ("jobs", "nexec master").
  Leadership(Store* store, std::string lease_name, std::string instance_id, absl::Duration ttl,
             absl::Duration act_within = absl::ZeroDuration());

  const Lease& lease() const { return lease_; }
  // The term this instance leads in (Take sets it; 0 before).
  int64_t term() const { return term_; }
  // When the lease was last taken or renewed (by this instance's clock, before the write).
  absl::Time renewed() const { return renewed_; }
  absl::Duration act_within() const { return act_within_; }

  // Standing by: takes the lease when it is free or already ours. True: ours, lead now.
  // False with `why` set: another instance holds it, or the store did not answer. At most
  // one try every half second (or quarter TTL).
  bool Take(absl::Time now, std::string* why);
  // Leading: renews the lease every quarter of its TTL. An error says the lease is lost
  // (another instance took it, or it could not be renewed within act_within): stop acting.
  absl::Status Keep(absl::Time now);
  // Leading ends (a clean stop): gives the lease up so a standby takes over at once.
  void Release();

 private:
  Lease lease_;
  absl::Duration act_within_;
  int64_t term_ = 0;
  absl::Time renewed_ = absl::InfinitePast();
  absl::Time next_try_ = absl::InfinitePast();
};

}  // namespace jc::store
