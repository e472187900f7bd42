#pragma once

#include <spdlog/fmt/fmt.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

// Lets spdlog print absl::string_view (a type of its own in Debian's Abseil build).
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  auto format(absl::string_view s, fmt::format_context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

namespace jc {

// Sets up the process-wide spdlog logger. `format` is "text" (human) or "json" (one JSON
// object per line for log shippers); `level` is trace|debug|info|warn|error.
absl::Status InitLogging(const std::string& level, const std::string& format);

}  // namespace jc
