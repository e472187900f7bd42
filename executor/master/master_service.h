#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "executor/master/master.h"

namespace jc::nexec {

// The gRPC edge of the master (nexec.v1.Master).
std::unique_ptr<grpc::Service> MakeMasterService(Master* master);

// Reaches agents over gRPC, one channel per agent address.
std::unique_ptr<AgentDialer> MakeGrpcAgentDialer();

}  // namespace jc::nexec
