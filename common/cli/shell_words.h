#pragma once

// A line split into words as sh splits a command line, with no expansion: what a job pack's
// line (`nexec submit --pack FILE`, LSF's `bsub -pack`) holds before its command. Blanks
// separate words; '...' is literal; "..." keeps its text with \" \\ \$ \` and \<newline>
// unescaped; outside quotes a backslash takes the next character as it is. Each word keeps
// where it started in the line, so that what follows the options can be taken verbatim.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::cli {

struct ShellWord {
  std::string text;  // without its quotes and escapes
  size_t start = 0;  // the offset in the line of its first character (a quote, if it starts with one)
};

// InvalidArgument for a quote never closed or a backslash that ends the line.
absl::StatusOr<std::vector<ShellWord>> SplitShellWords(absl::string_view line);

}  // namespace jc::cli
