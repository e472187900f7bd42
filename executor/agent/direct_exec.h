#pragma once

// A task's command without shell syntax is exec'd directly, as LSF and Slurm do (issue 48):
// `sleep 60` or `/opt/app/train --epochs=3` needs no /bin/sh between the agent and the
// program, which costs a shell's exec and start per task. Anything a shell would read
// otherwise (quotes, variables, globs, redirections, pipes, `;`, a builtin such as `cd` or
// `exit`, an assignment) keeps going through `/bin/sh -c`, and so does a program that is
// not found, or not plainly a system program anyone may run: the shell's own words ("not
// found", exit 127) stay the answer there.

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace jc::nexec {

// A command run as its program: `program` is exec'd with `argv`, whose first word is the
// command's own (`sleep`, as the shell passes it, not the path found).
struct DirectCommand {
  std::string program;
  std::vector<std::string> argv;
};

// `command` as its program when it has no shell syntax, its first word resolved through
// `path` (a task's $PATH) to the program a shell would run; nullopt: run it with /bin/sh -c.
// The program is run directly only when the shell would find the same file and the task's
// account may run it for sure: a regular file owned by root, executable by all, written by
// root alone, in directories (and through links) root owns and writes alone, starting as
// an ELF or "#!" file; and the search looks only in directories anyone may search, reached
// through root's alone, so that root's look tells the account nothing it could not see.
// (Reading the first bytes of a file root owns and alone writes reads nothing a user controls.)
std::optional<DirectCommand> DirectArgv(absl::string_view command, absl::string_view path);

// Whether `name` is a name the shell passes on in the environment (letters, digits and
// `_`, not starting with a digit): a task whose environment has any other (a bash function's
// `BASH_FUNC_x%%`, `A-B`) goes through the shell, which drops them, as it always did.
bool ShellName(absl::string_view name);

}  // namespace jc::nexec
