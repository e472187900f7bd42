#include "absl/strings/string_view.h"
#include "common/validate.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace jc {

absl::Status CheckId(absl::string_view field, absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  if (value.size() > kMaxShortField) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be shorter than 64 bytes (got ",
                                                   value.size(), ")"));
  }
  for (char c : value) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " \"", value, "\" may only contain letters, digits, '-', '_' and '.'"));
    }
  }
  return CheckPathComponent(field, value);
}

absl::Status CheckPathComponent(absl::string_view field, absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  if (value == "." || value == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " \"", value, "\" is not allowed: it would name a directory, not an item in it"));
  }
  if (value.find('/') != absl::string_view::npos || value.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must not contain '/' or NUL"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequiredText(absl::string_view field, absl::string_view value, size_t max_bytes) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  return CheckOptionalText(field, value, max_bytes);
}

absl::Status CheckOptionalText(absl::string_view field, absl::string_view value, size_t max_bytes) {
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be at most ", max_bytes,
                                                   " bytes (got ", value.size(), ")"));
  }
  return absl::OkStatus();
}

std::vector<std::string> SplitList(absl::string_view list) {
  std::string normalized = absl::StrReplaceAll(list, {{"，", ","}});
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(normalized, ',')) {
    std::string item(absl::StripAsciiWhitespace(part));
    if (!item.empty()) out.push_back(std::move(item));
  }
  return out;
}

std::string JoinList(const std::vector<std::string>& items) { return absl::StrJoin(items, ","); }

}  // namespace jc
