#include "executor/master/access.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace jc::nexec {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

bool IsAdministrator(const ExecutorConfig& config, const Principal& caller) {
  return caller.root || Contains(config.administrators, caller.user);
}

absl::Status MaySubmitAs(const ExecutorConfig& config, const Principal& caller, const std::string& user) {
  if (user == caller.user || IsAdministrator(config, caller)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      caller.user, " may not submit jobs as ", user,
      " (only root and the administrators named in the executor's configuration may)"));
}

absl::Status MayControl(const ExecutorConfig& config, const Principal& caller, const std::string& job_user) {
  if (job_user == caller.user || IsAdministrator(config, caller)) return absl::OkStatus();
  for (const auto& [group, admins] : config.group_admins) {
    if (!Contains(admins, caller.user)) continue;
    auto members = config.user_groups.find(group);
    if (members != config.user_groups.end() && Contains(members->second, job_user)) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      caller.user, " may not act on a job of ", job_user,
      " (its owner, root, the configured administrators and its group's administrators may)"));
}

absl::Status MayExec(const ExecutorConfig& config, const Principal& caller, const std::string& job_user) {
  if (job_user == caller.user || IsAdministrator(config, caller)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      caller.user, " may not run commands in a job of ", job_user,
      " (they run as its account: its owner, root and the configured administrators may)"));
}

}  // namespace jc::nexec
