#pragma once

// nexec submit -W: a run limit as LSF writes it ([hours:]minutes: "30", "1:30") or as a
// duration ("90s", "2h", "1h30m").

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace jc::nexec {

absl::StatusOr<absl::Duration> ParseRunLimit(const std::string& text);

}  // namespace jc::nexec
