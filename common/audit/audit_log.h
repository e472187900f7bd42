#pragma once

// The audit log (SPEC C6): who did what to which object, with what outcome, from where.
// A mutation's row is written in the same transaction as the change (it rides along with
// the first transaction that writes while the request is served: store::RiderRow); a call
// that changed nothing (refused, invalid, failed) gets its row in a transaction of its
// own, refusals at most `refused_per_second` a second *per source address* (and ten times
// that in all) so that a flood of bad requests cannot fill the store, nor hide another
// caller's refused attempts behind its own; the first refusal recorded after some were
// dropped says how many.

#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"

#include "absl/status/statusor.h"
#include "common/auth/rate_limiter.h"
#include "common/clock.h"
#include "common/store/store.h"
#include "jointcloud/v1/identity.pb.h"

namespace jc::audit {

// The audit of one call: its record, and the row that carries it with the change.
struct CallAudit {
  jointcloud::v1::AuditRecord record;
  store::RiderRow rider;
};

class AuditLog {
 public:
  AuditLog(store::Store* store, const Clock* clock, double refused_per_second = 20);

  // A call's audit with its id and time set; the record's other fields are the caller's to
  // fill. Its rider row writes the record as it is at commit time.
  std::shared_ptr<CallAudit> Begin();
  // Writes the record of a call that committed no change, in its own transaction.
  // Records whose outcome is not OK are dropped beyond the refusal rate.
  absl::Status WriteAlone(const jointcloud::v1::AuditRecord& record);
  // For the job manager, whose writes happen on its own thread: the insert and values of
  // `record`, to add to a transaction by hand.
  static const char* Insert();
  static store::Params Values(const jointcloud::v1::AuditRecord& record);

  absl::StatusOr<jointcloud::v1::ListAuditRecordsResponse> List(const jointcloud::v1::ListAuditRecordsRequest& req);

 private:
  store::Store* store_;
  const Clock* clock_;
  auth::RateLimiter refusals_;       // by source address
  auth::RateLimiter all_refusals_;   // all sources together
  std::mutex dropped_mu_;
  absl::flat_hash_map<std::string, int64_t> dropped_;  // refusals not recorded, by source
};

}  // namespace jc::audit
