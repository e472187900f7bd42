#pragma once

#include <functional>
#include <memory>

#include "services/monitor/monitor.h"
#include "services/scheduler/scheduler.h"

namespace grpc {
class Channel;
}

namespace jc::scheduler {

using ChannelSource = std::function<std::shared_ptr<grpc::Channel>()>;

// Reads the registry, catalog and datamon over gRPC, each over its own channel (a source
// is asked on first use, so an in-process channel can be made after the server starts),
// and the monitor's observations in process (`monitor` may be null: no usage, every
// center idle).
std::unique_ptr<InputsSource> MakeGrpcInputsSource(ChannelSource registry, ChannelSource catalog,
                                                   ChannelSource datamon, monitor::Monitor* monitor);

}  // namespace jc::scheduler
