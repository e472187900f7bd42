#pragma once

#include <string>

#include "absl/status/status.h"

namespace jc {

// Sets up the process-wide spdlog logger. `format` is "text" (human) or "json" (one JSON
// object per line for log shippers); `level` is trace|debug|info|warn|error.
absl::Status InitLogging(const std::string& level, const std::string& format);

}  // namespace jc
