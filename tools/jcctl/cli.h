#pragma once

// jcctl's command line: a table of commands (noun verb, as `jcctl job list`), each with its
// flags, from which parsing, `--help` on every command and shell completion all come, so
// the three cannot disagree.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::jcctl {

struct FlagSpec {
  std::string name;        // long name, without dashes
  char short_name = 0;     // 0: none
  bool takes_value = true;
  std::string help;
};

// What a command was given: its positional arguments and flag values.
struct Invocation {
  std::vector<std::string> args;
  std::map<std::string, std::string> flags;  // a bool flag given is "true"

  bool Has(const std::string& flag) const { return flags.count(flag) > 0; }
  std::string Get(const std::string& flag, const std::string& fallback = "") const {
    auto it = flags.find(flag);
    return it == flags.end() ? fallback : it->second;
  }
};

class Context;  // commands.h

struct CommandSpec {
  std::vector<std::string> path;  // {"job", "list"}
  std::string args_usage;         // "JOB_ID"
  std::string summary;
  std::vector<FlagSpec> flags;
  int min_args = 0;
  int max_args = 0;
  // Returns the exit code.
  std::function<int(Context&, const Invocation&)> run;
};

// The flags every command takes (server, token, output, ...).
const std::vector<FlagSpec>& GlobalFlags();

// What the command line asks for.
struct Parsed {
  const CommandSpec* command = nullptr;  // null: help was asked for or no command matched
  Invocation invocation;                 // the command's and the global flags
  bool help = false;                     // --help / -h / `help`
  std::vector<std::string> words;        // the command words given (for help on a group)
};

// InvalidArgument with one line saying what is wrong (an unknown command or flag, a
// missing value, too many or too few arguments).
absl::StatusOr<Parsed> Parse(const std::vector<CommandSpec>& commands, const std::vector<std::string>& argv);

// Help for the whole tool, for a group (`jcctl job --help`) or for one command.
std::string Help(const std::vector<CommandSpec>& commands, const std::vector<std::string>& words);
std::string CommandHelp(const CommandSpec& command);

// A completion script for bash or zsh; InvalidArgument for another shell.
absl::StatusOr<std::string> Completion(const std::vector<CommandSpec>& commands, const std::string& shell);

}  // namespace jc::jcctl
