#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "services/scheduler/scheduler.h"

namespace jc::scheduler {

// The gRPC edge of the scheduler (jointcloud.v1.SchedulerService).
std::unique_ptr<grpc::Service> MakeSchedulerService(Scheduler* scheduler);

}  // namespace jc::scheduler
