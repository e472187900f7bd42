#include "absl/strings/string_view.h"
#include "common/paging.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace jc {

absl::StatusOr<int> NormalizePageSize(int requested) {
  if (requested < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size must not be negative (got ",
                                                   requested, ")"));
  }
  if (requested == 0) return kDefaultPageSize;
  return requested > kMaxPageSize ? kMaxPageSize : requested;
}

std::string EncodePageToken(absl::string_view last_key) {
  return absl::WebSafeBase64Escape(absl::StrCat("k1:", last_key));
}

absl::StatusOr<std::string> DecodePageToken(absl::string_view token) {
  if (token.empty()) return std::string();
  std::string raw;
  // Every key this server issues is UTF-8 text (PostgreSQL refuses anything else, with
  // its own words, as a 500).
  if (!absl::WebSafeBase64Unescape(token, &raw) || raw.rfind("k1:", 0) != 0 || !IsUtf8(raw) ||
      raw.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("page_token is not one this server issued");
  }
  return raw.substr(3);
}

}  // namespace jc
