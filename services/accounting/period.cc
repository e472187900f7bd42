#include "services/accounting/period.h"

#include "absl/strings/str_cat.h"

namespace jc::accounting {
namespace {

constexpr char kForms[] = "a month (2026-11), a day (2026-11-26) or an RFC 3339 instant (2026-11-26T08:00:00Z)";

}  // namespace

absl::StatusOr<std::pair<absl::Time, absl::Time>> ParseMonth(const std::string& text) {
  absl::CivilMonth month;
  if (text.size() != 7 || !absl::ParseCivilTime(text, &month)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a month (2026-11)"));
  }
  return std::make_pair(absl::FromCivil(month, absl::UTCTimeZone()), absl::FromCivil(month + 1, absl::UTCTimeZone()));
}

absl::StatusOr<absl::Time> ParseBound(const std::string& text) {
  absl::CivilMonth month;
  absl::CivilDay day;
  if (text.size() == 7 && absl::ParseCivilTime(text, &month)) return absl::FromCivil(month, absl::UTCTimeZone());
  if (text.size() == 10 && absl::ParseCivilTime(text, &day)) return absl::FromCivil(day, absl::UTCTimeZone());
  absl::Time t;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &t, &error)) return t;
  return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not ", kForms));
}

absl::StatusOr<absl::Time> ParseEndBound(const std::string& text) {
  absl::CivilMonth month;
  absl::CivilDay day;
  if (text.size() == 7 && absl::ParseCivilTime(text, &month)) return absl::FromCivil(month + 1, absl::UTCTimeZone());
  if (text.size() == 10 && absl::ParseCivilTime(text, &day)) return absl::FromCivil(day + 1, absl::UTCTimeZone());
  return ParseBound(text);
}

}  // namespace jc::accounting
