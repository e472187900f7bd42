#include "common/store/leadership.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace jc::store {

Leadership::Leadership(Store* store, std::string lease_name, std::string instance_id, absl::Duration ttl,
                       absl::Duration act_within)
    : lease_(store, std::move(lease_name), std::move(instance_id), ttl),
      act_within_(act_within > absl::ZeroDuration() ? std::min(act_within, ttl) : ttl) {}

bool Leadership::Take(absl::Time now, std::string* why) {
  if (now < next_try_) return false;
  // A released lease is taken within half a second; an expired one, once it expires.
  next_try_ = now + std::min(lease_.ttl() / 4, absl::Milliseconds(500));
  absl::StatusOr<bool> won = lease_.TryAcquire(now, /*new_term=*/true);
  if (won.ok() && *won) {
    renewed_ = now;
    term_ = lease_.term();
    return true;
  }
  if (!won.ok()) {
    *why = absl::StrCat("not leading: the store does not answer (", won.status().message(), "); retrying");
  } else {
    auto current = lease_.Current();
    *why = absl::StrCat("standing by: ", current.ok() && !current->first.empty() ? current->first : "another instance",
                        " holds the ", lease_.name(), " lease",
                        current.ok() ? absl::StrCat(" (until ", absl::FormatTime(current->second), ")") : "",
                        "; this instance takes over when it ends");
  }
  return false;
}

absl::Status Leadership::Keep(absl::Time now) {
  if (now - renewed_ < lease_.ttl() / 4) return absl::OkStatus();
  absl::StatusOr<bool> held = lease_.TryAcquire(now);
  if (held.ok() && *held && lease_.term() == term_) {
    renewed_ = now;
    return absl::OkStatus();
  }
  if ((held.ok() && (!*held || lease_.term() != term_)) || now - renewed_ >= act_within_) {
    // Another instance leads now (or may soon: the lease could not be renewed in time).
    // Two leaders would act on the same jobs differently, so this one stops acting at
    // once; its writes are fenced by the lease meanwhile.
    return absl::UnavailableError(absl::StrCat(
        "lost the ", lease_.name(), " lease (",
        held.ok() ? (*held ? "it ended and was taken again in a new term" : "another instance took it")
                  : absl::StrCat("not renewed for ", absl::FormatDuration(now - renewed_), ": ",
                                 held.status().message()),
        ")"));
  }
  return absl::OkStatus();  // not renewed this time, but still within act_within: try again soon
}

void Leadership::Release() {
  if (absl::Status s = lease_.Release(); !s.ok()) {
    spdlog::warn("releasing the {} lease: {}", lease_.name(), s.ToString());
  }
}

}  // namespace jc::store
