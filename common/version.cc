#include "common/version.h"

#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"

#ifndef JC_VERSION
#define JC_VERSION "unknown"
#endif
#ifndef JC_COMMIT
#define JC_COMMIT "unknown"
#endif

namespace jc {

std::string VersionLine(const std::string& program) {
  return absl::StrCat(program, " ", JC_VERSION, " (commit ", JC_COMMIT, ")");
}

void InstallVersionFlag(const std::string& program) {
  absl::FlagsUsageConfig config;
  config.version_string = [program] { return VersionLine(program) + "\n"; };
  absl::SetFlagsUsageConfig(config);
}

}  // namespace jc
