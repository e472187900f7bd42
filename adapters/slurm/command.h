#pragma once

// Runs one of the scheduler's command-line tools (sbatch, squeue, ...) and collects what
// it printed. No shell is involved: arguments go to the program as they are.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace jc::adapter {

struct CommandResult {
  int exit_code = 0;  // 128 + signal when it was killed
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up in PATH) with the adapter's environment. Unavailable when it
// cannot be started; DeadlineExceeded (after killing it) when it outlives `timeout`.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout = absl::Seconds(30));

}  // namespace jc::adapter
