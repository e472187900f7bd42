#include "services/jobs/job_access.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jc::jobs {

absl::Status AdmitCreate(const auth::Principal& caller, v1::CreateTrainJobRequest* req) {
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"userName", &req->user_name()},
                                     {"createdUser", &req->created_user()}}) {
    if (!value->empty() && *value != caller.name) {
      return absl::InvalidArgumentError(absl::StrCat(field, " \"", *value, "\" is not the caller (\"", caller.name,
                                                     "\"): jobs run as whoever submits them; leave ", field, " out"));
    }
  }
  req->set_user_name(caller.name);
  req->set_created_user(caller.name);
  if (req->project().empty() && !caller.IsAdmin()) {
    std::vector<std::string> mine;
    for (const auto& [project, role] : caller.projects) {
      if (role >= auth::ProjectRole::kMember) mine.push_back(project);
    }
    if (mine.size() != 1) {
      return mine.empty() ? absl::PermissionDeniedError(absl::StrCat(caller.name, " is a member of no project, so "
                                                                     "cannot submit jobs; an admin adds members"))
                          : absl::InvalidArgumentError(absl::StrCat("name the job's project: ", caller.name,
                                                                    " is a member of ", absl::StrJoin(mine, ", ")));
    }
    req->set_project(mine.front());
  }
  if (!caller.HasRole(req->project(), auth::ProjectRole::kMember)) {
    return absl::PermissionDeniedError(
        absl::StrCat(caller.name, " is not a member of project \"", req->project(), "\" and cannot submit to it"));
  }
  if (!req->idempotency_key().empty()) {
    req->set_idempotency_key(absl::StrCat(caller.name, "/", req->idempotency_key()));
  }
  return absl::OkStatus();
}

bool MaySeeJobsOf(const auth::Principal& caller, const std::string& project) {
  return caller.RoleIn(project) >= auth::ProjectRole::kViewer;
}

absl::Status CheckJobAccess(const auth::Principal& caller, const v1::TrainJob& job, auth::ProjectRole need) {
  auth::ProjectRole held = caller.RoleIn(job.project());
  if (!MaySeeJobsOf(caller, job.project())) {
    return absl::NotFoundError(absl::StrCat("job \"", job.job_id(), "\" not found"));
  }
  if (held < need) {
    return absl::PermissionDeniedError(absl::StrCat(caller.name, " may read but not change the jobs of project \"",
                                                    job.project(), "\" (a member may)"));
  }
  return absl::OkStatus();
}

}  // namespace jc::jobs
