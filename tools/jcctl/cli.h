#pragma once

// jcctl's command line: its rows of the shared command table (common/cli/command_table.h),
// from which parsing, `--help` on every command and shell completion all come.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cli/command_table.h"

namespace jc::jcctl {

using FlagSpec = cli::FlagSpec;
using Invocation = cli::Invocation;

class Context;  // commands.h
using CommandSpec = cli::Command<Context>;

// jcctl itself: its name, global flags (server, token, output, ...) and help text.
const cli::Tool& Tool();
inline const std::vector<FlagSpec>& GlobalFlags() { return Tool().global_flags; }

// What the command line asks for (command: null when help was asked for).
struct Parsed {
  const CommandSpec* command = nullptr;
  Invocation invocation;
  bool help = false;
  std::vector<std::string> words;
};
absl::StatusOr<Parsed> Parse(const std::vector<CommandSpec>& commands, const std::vector<std::string>& argv);
std::string Help(const std::vector<CommandSpec>& commands, const std::vector<std::string>& words);
absl::StatusOr<std::string> Completion(const std::vector<CommandSpec>& commands, const std::string& shell);

}  // namespace jc::jcctl
