#include "services/jobs/leadership.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace jc::jobs {

bool Leadership::Take(absl::Time now, std::string* why) {
  if (now < next_try_) return false;
  // A released lease is taken within half a second; an expired one, once it expires.
  next_try_ = now + std::min(lease_.ttl() / 4, absl::Milliseconds(500));
  absl::StatusOr<bool> won = lease_.TryAcquire(now);
  if (won.ok() && *won) {
    renewed_ = now;
    return true;
  }
  if (!won.ok()) {
    *why = absl::StrCat("not leading: the store does not answer (", won.status().message(), "); retrying");
  } else {
    auto current = lease_.Current();
    *why = absl::StrCat("standing by: ", current.ok() && !current->first.empty() ? current->first : "another instance",
                        " holds the jobs lease",
                        current.ok() ? absl::StrCat(" (until ", absl::FormatTime(current->second), ")") : "",
                        "; this instance takes over when it ends");
  }
  return false;
}

absl::Status Leadership::Keep(absl::Time now) {
  if (now - renewed_ < lease_.ttl() / 4) return absl::OkStatus();
  absl::StatusOr<bool> held = lease_.TryAcquire(now);
  if (held.ok() && *held) {
    renewed_ = now;
    return absl::OkStatus();
  }
  if ((held.ok() && !*held) || now - renewed_ >= lease_.ttl()) {
    // Another instance leads now (or may: the lease could not be renewed in time). Two
    // leaders would place the same jobs differently, so this one stops acting at once;
    // its writes are fenced by the lease meanwhile.
    return absl::UnavailableError(absl::StrCat(
        "lost the jobs lease (", held.ok() ? "another instance took it" : std::string(held.status().message()), ")"));
  }
  return absl::OkStatus();  // not renewed this time, but still within the TTL: try again next cycle
}

void Leadership::Release() {
  if (absl::Status s = lease_.Release(); !s.ok()) spdlog::warn("job manager: releasing the lease: {}", s.ToString());
}

}  // namespace jc::jobs
