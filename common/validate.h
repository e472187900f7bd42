#pragma once

// Field checks shared by every service, each returning InvalidArgument with a message
// that names the field, so a client can fix its request without reading the code.

#include "absl/strings/string_view.h"
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace jc {

// The standard bounds ids and names at "less than 64 bytes".
inline constexpr size_t kMaxShortField = 63;

// A required identifier: 1..63 bytes of [A-Za-z0-9._-], since ids appear in URL paths,
// and never "." or "..", since ids become file and directory names at centers.
absl::Status CheckId(absl::string_view field, absl::string_view value);
// A name that becomes one path component (a dataset name or version, a replica or log
// file name): not empty, not "." or "..", no '/' and no NUL.
absl::Status CheckPathComponent(absl::string_view field, absl::string_view value);
// A required text field of 1..max_bytes bytes.
absl::Status CheckRequiredText(absl::string_view field, absl::string_view value,
                               size_t max_bytes = kMaxShortField);
// An optional text field of at most max_bytes bytes.
absl::Status CheckOptionalText(absl::string_view field, absl::string_view value,
                               size_t max_bytes = kMaxShortField);

// Splits a comma-separated list as the standard writes them ("center1,center2"; the
// full-width comma "，" of the Chinese examples is accepted too), trimming blanks and
// dropping empty items.
std::vector<std::string> SplitList(absl::string_view list);
std::string JoinList(const std::vector<std::string>& items);

}  // namespace jc
