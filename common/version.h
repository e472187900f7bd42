#pragma once

// What every binary answers to --version (SPEC C3): its name, Jointcloud's version (the
// CMake project's) and the commit it was built from, e.g.
//   jointcloud 0.1.0 (commit 1849407)

#include <string>

namespace jc {

std::string VersionLine(const std::string& program);

// For binaries that parse flags with absl: `--version` prints VersionLine and exits 0.
// Call before absl::ParseCommandLine.
void InstallVersionFlag(const std::string& program);

}  // namespace jc
