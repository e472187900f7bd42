#pragma once

// The caller's end of a command's exec stream (exec_stream.h), for the programs a person
// runs it from: `jcctl job exec` (over the endpoint listener) and `nexec exec` (over the
// nexec master's Exec call). This process's stdin goes to the command (raw, keys and ^C
// as typed, when it has a terminal and is a terminal), its output comes here, its
// terminal's size follows this one's (SIGWINCH), and its exit status is the answer.

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace jc::exec_stream {

// How the stream travels.
struct ClientLink {
  // Bytes toward the command; false once the link is gone.
  std::function<bool(const std::string&)> send;
  // The command's next bytes; false at the end of the link.
  std::function<bool(std::string*)> receive;
  // Ends the link (receive and send then fail), from another thread.
  std::function<void()> stop;
};

// This terminal's rows and columns (of stdin, stdout or stderr), when one has a size.
std::optional<std::pair<int, int>> TerminalSize();

// Runs the caller's side until the exit frame comes or the link ends. `input`: this
// process's stdin goes to the command (else its input ends at once); `tty`: it runs on a
// terminal. Returns its exit status (0-255), or Unavailable when the link ended first.
absl::StatusOr<int> RunExecClient(const ClientLink& link, bool input, bool tty, std::ostream& out, std::ostream& err);

}  // namespace jc::exec_stream
