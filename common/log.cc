#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace jc {

absl::Status InitLogging(const std::string& level, const std::string& format) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_level \"", level, "\": use trace, debug, info, warn or error"));
  }
  auto logger = spdlog::stderr_color_mt("jointcloud");
  if (format == "json") {
    // Messages are written as key=value text by the callers; quoting the payload keeps
    // each line a valid JSON object for log shippers.
    logger->set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","thread":%t,"msg":"%v"})",
        spdlog::pattern_time_type::utc);
  } else if (format == "text") {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v");
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_format \"", format, "\": use text or json"));
  }
  logger->set_level(parsed);
  spdlog::set_default_logger(logger);
  return absl::OkStatus();
}

}  // namespace jc
