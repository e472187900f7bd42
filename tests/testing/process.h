#pragma once

// Runs a real program for end-to-end tests: its output goes to a file the test can
// search, and waits are on a condition with a deadline, never a fixed sleep.

#include <sys/types.h>

#include <chrono>
#include <thread>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace jc::testing {

class Process {
 public:
  // Starts `argv` with stdout and stderr appended to `log_path`.
  Process(std::vector<std::string> argv, std::string log_path);
  ~Process();  // SIGKILLs the process if it still runs

  pid_t pid() const { return pid_; }
  // Waits until the log has a line matching `pattern`; returns its first capture group
  // (or the whole match), or nullopt at the deadline or when the process exits.
  std::optional<std::string> WaitForLog(const std::string& pattern,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(30));
  void Signal(int signal);
  // Waits for the exit; returns the exit code (128 + signal when killed), or nullopt.
  std::optional<int> Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  std::optional<int> exit_code_;
};

// Polls `condition` until it holds or the deadline passes.
template <typename Condition>
bool WaitUntil(Condition condition, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

}  // namespace jc::testing
