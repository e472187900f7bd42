#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "services/monitor/monitor.h"

namespace jc::monitor {

// The gRPC edge of the monitor (jointcloud.v1.MonitorService).
std::unique_ptr<grpc::Service> MakeMonitorService(Monitor* monitor);

}  // namespace jc::monitor
