#pragma once

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/impl/codegen/service_type.h>

#include "common/auth/principal.h"
#include "services/scheduler/scheduler.h"

namespace jc::scheduler {

// Whether a caller may see a job (OK, or NotFound as for a job that does not exist).
using JobVisibility = std::function<absl::Status(const auth::Principal& caller, const std::string& job_id)>;

// The gRPC edge of the scheduler (jointcloud.v1.SchedulerService). A job's placement is
// shown to those who may see the job; without `visible` (the jobs service runs elsewhere)
// only to admins.
std::unique_ptr<grpc::Service> MakeSchedulerService(Scheduler* scheduler, JobVisibility visible = nullptr);

}  // namespace jc::scheduler
