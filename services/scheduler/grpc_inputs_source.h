#pragma once

#include <functional>
#include <memory>

#include "services/monitor/monitor.h"
#include "services/scheduler/scheduler.h"

namespace grpc {
class Channel;
}

namespace jc::scheduler {

// Reads the registry, catalog and datamon over gRPC (`channel_source` is asked on first
// use, so an in-process channel can be made after the server starts) and the monitor's
// observations in process (`monitor` may be null: no usage, every center idle).
std::unique_ptr<InputsSource> MakeGrpcInputsSource(std::function<std::shared_ptr<grpc::Channel>()> channel_source,
                                                   monitor::Monitor* monitor);

}  // namespace jc::scheduler
