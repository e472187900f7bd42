#include "executor/master/master_lease.h"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "common/timestamp.h"

namespace jc::nexec {

namespace {

// The lease's holder: the address and this process's own mark. Two processes given one
// --advertise address (a mistake, or a restart while the old process still runs) are two
// holders, so the second waits for the first's lease to end instead of taking it at once
// while the first still writes.
std::string HolderOf(const std::string& address) {
  std::random_device random;
  return absl::StrCat(address, "/", absl::Hex(random(), absl::kZeroPad8));
}

}  // namespace

std::string MasterLease::AddressOfHolder(const std::string& holder) {
  const size_t slash = holder.rfind('/');
  return slash == std::string::npos ? holder : holder.substr(0, slash);
}

MasterLease::MasterLease(store::Store* store, std::string address, absl::Duration ttl)
    // Acting stops at 3/4 of the TTL without a renewal: a standby takes the lease only once
    // the whole TTL has passed, so the leader has stopped by then, clocks in step (NTP).
    : leadership_(store, kLeaseName, HolderOf(address), ttl, ttl * 3 / 4), address_(std::move(address)) {
  SetState(false, "", 0, "starting");
}

MasterLease::~MasterLease() {
  stopping_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  // A renewal that hangs on the store is not waited for (the process is ending).
  if (keeper_.joinable()) keeper_.detach();
}

bool MasterLease::TryLead(std::string* why) {
  std::string reason;
  if (leadership_.Take(absl::Now(), &reason)) {
    SetState(true, address_, leadership_.term(), "leading");
    leading_ = true;
    return true;
  }
  if (reason.empty()) return false;  // not tried this time (at most every half second)
  *why = reason;
  auto holder = Holder();
  auto term = leadership_.lease().CurrentTerm();  // the leader's, shown by standbys too
  SetState(false, holder.ok() ? AddressOfHolder(holder->first) : "", term.ok() ? *term : 0, reason);
  return false;
}

absl::StatusOr<std::pair<std::string, absl::Time>> MasterLease::Holder() {
  return leadership_.lease().Current();
}

void MasterLease::KeepLeading(std::function<void(const absl::Status&)> lost) {
  renewed_micros_ = absl::ToUnixMicros(leadership_.renewed());
  auto lose = [this, lost = std::move(lost)](const absl::Status& why) {
    if (lost_.exchange(true)) return;
    leading_ = false;
    SetState(false, "", leadership_.term(), std::string(why.message()));
    lost(why);
  };
  keeper_ = std::thread([this, lose] {
    while (!stopping_) {
      absl::SleepFor(absl::Milliseconds(250));
      if (stopping_) return;
      absl::Status kept = leadership_.Keep(absl::Now());
      if (!kept.ok()) return lose(kept);
      renewed_micros_ = absl::ToUnixMicros(leadership_.renewed());
    }
  });
  // A renewal that hangs (the store's host gone dark: no answer, no error) holds the
  // renewing thread; this one watches the time since the last renewal that committed.
  watchdog_ = std::thread([this, lose] {
    while (!stopping_) {
      absl::SleepFor(absl::Milliseconds(100));
      const absl::Duration since = absl::Now() - absl::FromUnixMicros(renewed_micros_.load());
      if (!stopping_ && since >= leadership_.act_within()) {
        return lose(absl::UnavailableError(absl::StrCat("lost the ", kLeaseName, " lease (not renewed for ",
                                                        absl::FormatDuration(since), ": the store does not answer)")));
      }
    }
  });
}

absl::Status MasterLease::Fence(store::Transaction& txn) const {
  if (!leading_) {
    return absl::UnavailableError(
        absl::StrCat("this nexec master (", address_, ") does not lead (term ", term(), " is over); its write was not made"));
  }
  return leadership_.lease().CheckHeld(txn, absl::Now());
}

void MasterLease::Release() {
  stopping_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  if (keeper_.joinable()) keeper_.join();
  if (leading_.exchange(false)) {
    leadership_.Release();
    SetState(false, "", leadership_.term(), "stopped: the lease was given up");
  }
}

pb::LeadershipInfo MasterLease::Info() const {
  absl::MutexLock lock(&mu_);
  return info_;
}

void MasterLease::SetIdentity(const std::string& identity) {
  absl::MutexLock lock(&mu_);
  info_.set_identity(identity);
}

void MasterLease::SetState(bool leading, const std::string& leader, int64_t term, const std::string& state) {
  absl::MutexLock lock(&mu_);
  const bool changed = info_.leading() != leading || info_.state().empty() || (leading && info_.term() != term);
  info_.set_address(address_);
  info_.set_leading(leading);
  info_.set_leader(leader);
  if (term > 0) info_.set_term(term);
  info_.set_state(state);
  if (changed) *info_.mutable_since() = ToTimestamp(absl::Now());
  if (leading_gauge_ != nullptr) leading_gauge_->Set(leading ? 1 : 0);
  if (term_gauge_ != nullptr) term_gauge_->Set(static_cast<double>(info_.term()));
}

void MasterLease::EnableMetrics(prometheus::Registry& registry) {
  auto& leading = prometheus::BuildGauge()
                      .Name("nexec_master_leading")
                      .Help("1 while this nexec master holds the store's nexec_master lease and acts; 0 while it "
                            "stands by (several masters share a PostgreSQL store, one leads)")
                      .Register(registry);
  auto& term = prometheus::BuildGauge()
                   .Name("nexec_master_term")
                   .Help("The nexec_master lease's term as this master last saw it: counted up each time the lease "
                         "changes hands (a failover), so an increase is a leadership change")
                   .Register(registry);
  absl::MutexLock lock(&mu_);
  leading_gauge_ = &leading.Add({});
  term_gauge_ = &term.Add({});
  leading_gauge_->Set(info_.leading() ? 1 : 0);
  term_gauge_->Set(static_cast<double>(info_.term()));
}

}  // namespace jc::nexec
