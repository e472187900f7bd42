#pragma once

// Runs a program the center's configuration names (a data mover, skopeo for the image
// mirror), without a shell, its stdin /dev/null and its output captured, and waits for it.

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace jc::adapter {

struct ProgramResult {
  bool started = false;  // false: it could not be run at all (`how` says why)
  bool ok = false;       // it exited 0
  std::string how;       // "exited 3", "was killed by signal 9", or why it did not start
  std::string output;    // its stdout and stderr, the first 4 KB
};

// `log`: where its output goes meanwhile (removed afterwards); must be writable. Past
// `timeout` it is killed with its process group (SIGKILL: a stopped process goes too) and
// the result says so: a program run as another account must not hold the caller forever.
ProgramResult RunProgram(const std::vector<std::string>& args, const std::string& log,
                         absl::Duration timeout = absl::InfiniteDuration());

}  // namespace jc::adapter
