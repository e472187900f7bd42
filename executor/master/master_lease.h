#pragma once

// The nexec master's leadership (issue 47; docs/executor.md "High availability"). Several
// nexec-master processes share one PostgreSQL store; the one holding the store's
// "nexec_master" lease leads (the same lease and leadership as the control plane's job
// manager, common/store/leadership.h), the others stand by, answering only who leads. A
// leader renews the lease from its own thread; one that cannot renew it within 3/4 of its
// TTL, or finds it taken, stops acting at once (the process exits: its memory is a term's
// that is over, and a restart stands by and reloads from the store when it leads again),
// well before a standby can take the lease. Every write of the leader checks the lease in
// its transaction (Fence), and every launch, signal, input and command it sends to an agent
// carries its term, which agents compare with the newest they have seen.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/store/leadership.h"
#include "nexec/v1/nexec.pb.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Gauge;
}  // namespace prometheus

namespace jc::nexec {

namespace pb = ::nexec::v1;

class MasterLease {
 public:
  static constexpr char kLeaseName[] = "nexec_master";

  // `address`: where this master answers (its --advertise address): the lease's holder,
  // which standbys name as the leader.
  MasterLease(store::Store* store, std::string address, absl::Duration ttl);
  ~MasterLease();

  // Standing by: one try at the lease (at most every half second). True: this master
  // leads from now on, in term(). `why` says what stands in the way otherwise.
  bool TryLead(std::string* why);
  // The address in a holder's name (holders are "ADDRESS/MARK": one per process).
  static std::string AddressOfHolder(const std::string& holder);
  // The current holder and when its hold ends, as the store says ("" when none).
  absl::StatusOr<std::pair<std::string, absl::Time>> Holder();
  // Leading: renews the lease from a thread of its own until Release; `lost` is called
  // (once, from that thread or from a watchdog that sees no renewal within 3/4 of the TTL
  // while a renewal hangs on the store) when it cannot be kept.
  void KeepLeading(std::function<void(const absl::Status&)> lost);
  // The fence every write of the leader checks in its transaction first.
  absl::Status Fence(store::Transaction& txn) const;
  // Stops renewing and, when this master leads, gives the lease up so a standby leads at once.
  void Release();

  int64_t term() const { return leadership_.term(); }
  const std::string& address() const { return address_; }
  bool leading() const { return leading_; }
  // What the Leadership RPC answers (thread-safe); the store identity once known.
  pb::LeadershipInfo Info() const;
  void SetIdentity(const std::string& identity);
  // nexec_master_leading and nexec_master_term from now on.
  void EnableMetrics(prometheus::Registry& registry);

 private:
  void SetState(bool leading, const std::string& leader, int64_t term, const std::string& state);

  store::Leadership leadership_;
  const std::string address_;
  std::atomic<bool> leading_{false};
  mutable absl::Mutex mu_;
  pb::LeadershipInfo info_ ABSL_GUARDED_BY(mu_);
  prometheus::Gauge* leading_gauge_ = nullptr;
  prometheus::Gauge* term_gauge_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> lost_{false};
  std::atomic<int64_t> renewed_micros_{0};  // the keeper's last renewal, for the watchdog
  std::thread keeper_;
  std::thread watchdog_;
};

}  // namespace jc::nexec
