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

// The words of `command` when it has no shell syntax, its first resolved through `path`
// (a task's $PATH) to the program a shell would run; nullopt: run it with /bin/sh -c.
// The program is run directly only when the shell would find the same file and the task's
// account may run it for sure: a regular file owned by root, executable by all, written by
// root alone, in directories root owns and writes alone, starting as an ELF or "#!" file.
// (Reading the first bytes of a file root owns and alone writes reads nothing a user controls.)
std::optional<std::vector<std::string>> DirectArgv(absl::string_view command, absl::string_view path);

}  // namespace jc::nexec
