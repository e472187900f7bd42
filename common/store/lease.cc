#include "common/store/lease.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace jc::store {

absl::StatusOr<bool> Lease::TryAcquire(absl::Time now, bool new_term) {
  // One statement, so two instances racing for a free lease cannot both win.
  // The term goes up when the lease changes hands or is taken again after it ended: a
  // holder that renews in time keeps its term.
  JC_ASSIGN_OR_RETURN(int64_t changed,
                      store_->Exec("INSERT INTO leases (name, holder, expires_at, term) VALUES ($1, $2, $3, 1) "
                                   "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
                                   "expires_at = excluded.expires_at, "
                                   "term = CASE WHEN leases.holder = excluded.holder AND leases.expires_at >= $4 "
                                   "AND $5 = 0 THEN leases.term ELSE leases.term + 1 END "
                                   "WHERE leases.holder = excluded.holder OR leases.expires_at < $4",
                                   {name_, holder_, absl::ToUnixMicros(now + ttl_), absl::ToUnixMicros(now),
                                    int64_t{new_term ? 1 : 0}}));
  held_until_micros_ = changed > 0 ? absl::ToUnixMicros(now + ttl_) : 0;
  if (changed > 0) {
    JC_ASSIGN_OR_RETURN(Rows rows,
                        store_->Query("SELECT term FROM leases WHERE name = $1 AND holder = $2", {name_, holder_}));
    int64_t term = 0;
    if (!rows.empty() && rows[0][0]) (void)absl::SimpleAtoi(*rows[0][0], &term);
    term_ = term;
  }
  return changed > 0;
}

absl::StatusOr<std::pair<std::string, absl::Time>> Lease::Current() const {
  JC_ASSIGN_OR_RETURN(Rows rows, store_->Query("SELECT holder, expires_at FROM leases WHERE name = $1", {name_}));
  if (rows.empty() || !rows[0][0] || !rows[0][1]) return std::make_pair(std::string(), absl::InfinitePast());
  int64_t micros = 0;
  (void)absl::SimpleAtoi(*rows[0][1], &micros);
  return std::make_pair(*rows[0][0], absl::FromUnixMicros(micros));
}

absl::StatusOr<int64_t> Lease::CurrentTerm() const {
  JC_ASSIGN_OR_RETURN(Rows rows, store_->Query("SELECT term FROM leases WHERE name = $1", {name_}));
  int64_t term = 0;
  if (!rows.empty() && rows[0][0]) (void)absl::SimpleAtoi(*rows[0][0], &term);
  return term;
}

absl::Status Lease::CheckHeld(Transaction& txn, absl::Time now) const {
  if (absl::FromUnixMicros(held_until_micros_.load()) - now > ttl_ / 2) return absl::OkStatus();
  JC_ASSIGN_OR_RETURN(Rows rows, txn.Query("SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND expires_at >= $3",
                                           {name_, holder_, absl::ToUnixMicros(now)}));
  if (rows.empty()) {
    return absl::UnavailableError(
        absl::StrCat("this instance (", holder_, ") no longer holds the ", name_, " lease; its write was not made"));
  }
  return absl::OkStatus();
}

absl::Status Lease::Release() {
  held_until_micros_ = 0;
  // Ended, not deleted: the row keeps its term, so the next holder's is a later one (a
  // deleted row would start over at 1, below what agents have already seen).
  return store_->Exec("UPDATE leases SET holder = '', expires_at = 0 WHERE name = $1 AND holder = $2",
                      {name_, holder_})
      .status();
}

}  // namespace jc::store
