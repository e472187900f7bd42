#pragma once

// Periods of accounting as people write them: a month ("2026-11"), a day ("2026-11-26")
// or an instant (RFC 3339, "2026-11-26T08:00:00Z"), all in UTC.

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace jc::accounting {

// The instant `text` starts at: a month's or a day's first second, or the instant itself.
absl::StatusOr<absl::Time> ParseBound(const std::string& text);

// The bound after `text` ends: the next month or day; an instant is itself.
absl::StatusOr<absl::Time> ParseEndBound(const std::string& text);

// [from, to) of a month ("2026-11"): InvalidArgument for anything else.
absl::StatusOr<std::pair<absl::Time, absl::Time>> ParseMonth(const std::string& text);

}  // namespace jc::accounting
