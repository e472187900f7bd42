#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "services/jobs/job_manager.h"

namespace jc::jobs {

// The gRPC edge of the job manager (jointcloud.v1.JobService).
std::unique_ptr<grpc::Service> MakeJobService(JobManager* jobs);

}  // namespace jc::jobs
