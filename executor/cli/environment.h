#pragma once

// The environment a job's tasks get from the command that submits or starts them (SPEC
// B11): `--env all` (the default, as LSF and Slurm pass it), `none`, or the variables
// named. nexec's own variables are left out: the agent sets them on top.

#include <map>
#include <ostream>
#include <string>

namespace jc::nexec {

// A name in the list that is not set here is skipped with a warning on `warnings`.
std::map<std::string, std::string> EnvironmentToSend(const std::string& which, std::ostream& warnings);

}  // namespace jc::nexec
