#pragma once

// Keyset paging shared by every List call: the page token is the opaque (web-safe
// base64) key of the last item returned, so pages stay stable while rows are added.

#include "absl/strings/string_view.h"
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace jc {

inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;

// 0 -> default; negative -> error; above the maximum -> the maximum.
absl::StatusOr<int> NormalizePageSize(int requested);
std::string EncodePageToken(absl::string_view last_key);
absl::StatusOr<std::string> DecodePageToken(absl::string_view token);

}  // namespace jc
