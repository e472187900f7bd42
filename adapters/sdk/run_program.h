#pragma once

// Runs a program the center's configuration names (a data mover, skopeo for the image
// mirror), without a shell, its stdin /dev/null and its output captured, and waits for it.

#include <string>
#include <vector>

namespace jc::adapter {

struct ProgramResult {
  bool started = false;  // false: it could not be run at all (`how` says why)
  bool ok = false;       // it exited 0
  std::string how;       // "exited 3", "was killed by signal 9", or why it did not start
  std::string output;    // its stdout and stderr, the first 4 KB
};

// `log`: where its output goes meanwhile (removed afterwards); must be writable.
ProgramResult RunProgram(const std::vector<std::string>& args, const std::string& log);

}  // namespace jc::adapter
