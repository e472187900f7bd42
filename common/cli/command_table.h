#pragma once

// A command line as a table (noun verb, as `jcctl job list`, or one word, as `nexec jobs`):
// each command with its flags, from which parsing, `--help` on every command and shell
// completion all come, so the three cannot disagree. Shared by jcctl and nexec (issue 32
// item 3): each tool gives its name, global flags and its table; its commands are run with
// the tool's own context.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::cli {

struct FlagSpec {
  std::string name;        // long name, without dashes ("user"), or an LSF-style one ("Ep")
  char short_name = 0;     // 0: none
  bool takes_value = true;
  std::string help;
  // Spelled with one dash (`-Ep post`, `-app name`, `-Ip`), as LSF's bsub spells them; a
  // word that is exactly such a name is this flag, not a one-letter flag with a value.
  bool single_dash = false;
};

// What a command was given: its positional arguments and flag values.
struct Invocation {
  std::vector<std::string> args;
  std::map<std::string, std::string> flags;  // a flag without a value given is "true"

  bool Has(const std::string& flag) const { return flags.count(flag) > 0; }
  std::string Get(const std::string& flag, const std::string& fallback = "") const {
    auto it = flags.find(flag);
    return it == flags.end() ? fallback : it->second;
  }
};

// A command, apart from what runs it.
struct CommandInfo {
  std::vector<std::string> path;  // {"job", "list"}, or {"jobs"}
  std::string args_usage;         // "JOB_ID"
  std::string summary;            // first line in listings; the rest in the command's help
  std::vector<FlagSpec> flags;
  int min_args = 0;
  int max_args = 0;
  // Flags only before the first argument; everything from it on is an argument (a command
  // line to run: `nexec submit -n 2 mpirun -np 2 ./a.out`).
  bool args_end_flags = false;
};

// A row of a tool's table: the command and what runs it, with the tool's own context.
template <typename Context>
struct Command {
  std::vector<std::string> path;
  std::string args_usage;
  std::string summary;
  std::vector<FlagSpec> flags;
  int min_args = 0;
  int max_args = 0;
  std::function<int(Context&, const Invocation&)> run;  // returns the exit code
  bool args_end_flags = false;

  CommandInfo info() const { return {path, args_usage, summary, flags, min_args, max_args, args_end_flags}; }
};

// The tool around the table.
struct Tool {
  std::string name;                   // "jcctl"
  std::string description;            // the help's first paragraph
  std::string usage;                  // "NOUN VERB [ARGS] [flags]"
  std::vector<FlagSpec> global_flags;  // taken anywhere on the line, by every command
  std::string footer;                 // exit codes, where to read more
  // Completion of arguments from the server: for a command line starting with a pattern
  // (`"job get"`, `"reconcile *"`, as bash's case spells them), the script runs
  // `<tool> <ids_command> KIND` and offers its lines. Empty: arguments are not completed.
  std::string ids_command;
  std::vector<std::pair<std::string, std::string>> argument_ids;  // pattern -> KIND
};

// What the command line asks for.
struct Parsed {
  int command = -1;            // index into the table; -1: help was asked for or no command matched
  Invocation invocation;       // the command's and the global flags
  bool help = false;           // --help / -h / `help`
  std::vector<std::string> words;  // the command words given (for help on a group)
};

// InvalidArgument with one line saying what is wrong (an unknown command or flag, a
// missing value, too many or too few arguments).
absl::StatusOr<Parsed> Parse(const Tool& tool, const std::vector<CommandInfo>& commands,
                             const std::vector<std::string>& argv);

// Help for the whole tool, for a group (`jcctl job --help`) or for one command.
std::string Help(const Tool& tool, const std::vector<CommandInfo>& commands, const std::vector<std::string>& words);
std::string CommandHelp(const Tool& tool, const CommandInfo& command);

// A completion script for bash or zsh; InvalidArgument for another shell.
absl::StatusOr<std::string> Completion(const Tool& tool, const std::vector<CommandInfo>& commands,
                                       const std::string& shell);

template <typename Context>
std::vector<CommandInfo> Infos(const std::vector<Command<Context>>& commands) {
  std::vector<CommandInfo> out;
  out.reserve(commands.size());
  for (const auto& c : commands) out.push_back(c.info());
  return out;
}

}  // namespace jc::cli
