#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "common/watch_hub.h"
#include "services/jobs/job_manager.h"

namespace jc::jobs {

// The gRPC edge of the job manager (jointcloud.v1.JobService). Its watches run on `watches`.
std::unique_ptr<grpc::Service> MakeJobService(JobManager* jobs, WatchHub* watches);

}  // namespace jc::jobs
