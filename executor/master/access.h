#pragma once

// Who may do what to nexec jobs (B9), decided on the account proven by munge:
// - anyone submits for themselves; only root and the configured administrators submit
//   for another user (the native adapter does, for the accounts a center maps projects to);
// - a job's owner, root and administrators kill, suspend, resume and requeue it; a group's
//   administrators do too for jobs of the group's members;
// - a job's owner, root and administrators run commands in it (nexec exec: as its account);
// - everyone may list and read (as bjobs -u all does).

#include <string>

#include "absl/status/status.h"
#include "executor/master/config.h"

namespace jc::nexec {

struct Principal {
  std::string user;
  bool root = false;
};

// Root, or an administrator named in the executor's configuration.
bool IsAdministrator(const ExecutorConfig& config, const Principal& caller);

absl::Status MaySubmitAs(const ExecutorConfig& config, const Principal& caller, const std::string& user);
absl::Status MayControl(const ExecutorConfig& config, const Principal& caller, const std::string& job_user);
absl::Status MayExec(const ExecutorConfig& config, const Principal& caller, const std::string& job_user);

}  // namespace jc::nexec
