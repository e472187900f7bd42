#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "common/watch_hub.h"
#include "services/jobs/endpoint_tickets.h"
#include "services/jobs/job_manager.h"

namespace jc::jobs {

// The gRPC edge of the job manager (jointcloud.v1.JobService). Its watches run on `watches`;
// OpenEndpoint issues links through `tickets` (null: refused, no endpoint listener).
std::unique_ptr<grpc::Service> MakeJobService(JobManager* jobs, WatchHub* watches, EndpointTickets* tickets = nullptr);

}  // namespace jc::jobs
