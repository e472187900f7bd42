#include "services/jobs/validate_create.h"

#include "absl/strings/str_cat.h"
#include "services/scheduler/snapshot_builder.h"  // kMaxReplicasPerTask

namespace jc::jobs {

absl::Status ValidateCreate(const v1::CreateTrainJobRequest& req) {
  if (req.name().empty()) return absl::InvalidArgumentError("name: a job needs a name");
  if (req.name().size() > kMaxJobNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: at most ", kMaxJobNameLength, " characters, got ", req.name().size()));
  }
  if (req.tasks().empty()) return absl::InvalidArgumentError("tasks: a job needs at least one task");
  for (int t = 0; t < req.tasks_size(); ++t) {
    const auto& task = req.tasks(t);
    std::string where = absl::StrCat("tasks[", t, "]");
    if (task.name().size() > kMaxTaskNameLength) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".name: at most ", kMaxTaskNameLength, " characters, got ", task.name().size()));
    }
    if (task.command().find_first_not_of(" \t\n") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".command: a task needs a command"));
    }
    if (task.resource_spec_id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".resourceSpecId: a task needs a resource spec"));
    }
    if (task.replica_number() < 1 || task.replica_number() > scheduler::kMaxReplicasPerTask) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".replicaNumber: must be 1 to ",
                                                     scheduler::kMaxReplicasPerTask, ", got ", task.replica_number()));
    }
  }
  if (req.retry_policy().max_retries() < 0 || req.retry_policy().max_retries() > kMaxRetries) {
    return absl::InvalidArgumentError(
        absl::StrCat("retryPolicy.maxRetries: must be 0 to ", kMaxRetries, ", got ", req.retry_policy().max_retries()));
  }
  if (!v1::StatusPolicy_IsValid(req.status_policy())) {
    return absl::InvalidArgumentError("statusPolicy: unknown policy");
  }
  return absl::OkStatus();
}

}  // namespace jc::jobs
