#include "executor/cli/run_limit.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace jc::nexec {

absl::StatusOr<absl::Duration> ParseRunLimit(const std::string& text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("expected [hours:]minutes (30, 1:30) or a duration (90s, 2h), got \"", text, "\""));
  };
  absl::Duration limit;
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  int64_t hours = 0, minutes = 0;
  if (parts.size() == 1 && absl::SimpleAtoi(parts[0], &minutes)) {
    limit = absl::Minutes(minutes);
  } else if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &hours) && absl::SimpleAtoi(parts[1], &minutes) &&
             hours >= 0 && minutes >= 0 && minutes < 60) {
    limit = absl::Hours(hours) + absl::Minutes(minutes);
  } else if (!absl::ParseDuration(text, &limit)) {
    return bad();
  }
  if (limit <= absl::ZeroDuration()) return absl::InvalidArgumentError(absl::StrCat("must be positive, got \"", text, "\""));
  if (limit < absl::Seconds(1)) return absl::InvalidArgumentError("must be at least a second");
  return limit;
}

}  // namespace jc::nexec
