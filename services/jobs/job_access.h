#pragma once

// Who may do what with jobs (SPEC C6): jobs belong to a project; a viewer of it reads them,
// a member also submits and stops them. Decided on the job as stored, never on request
// fields; a job the caller may not see is "not found", exactly as one that does not exist.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/auth/principal.h"
#include "jointcloud/v1/jobs.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

// Fills the request's project (the caller's only one when it names none), userName and
// createdUser (the caller; a body naming someone else is refused), and scopes its
// idempotency key to the caller. PermissionDenied unless the caller is a member.
absl::Status AdmitCreate(const auth::Principal& caller, v1::CreateTrainJobRequest* request);

// Whether the caller sees the jobs of `project` (VIEWER in it; a job of no project is
// an admin's, seen by admins only).
bool MaySeeJobsOf(const auth::Principal& caller, const std::string& project);

// NotFound when the caller may not see the job, PermissionDenied when it sees it but its
// role is below `need`.
absl::Status CheckJobAccess(const auth::Principal& caller, const v1::TrainJob& job, auth::ProjectRole need);

}  // namespace jc::jobs
