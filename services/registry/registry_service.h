#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "services/registry/registry.h"

namespace jc::registry {

// The gRPC edge of the registry (jointcloud.v1.RegistryService).
std::unique_ptr<grpc::Service> MakeRegistryService(Registry* registry);

}  // namespace jc::registry
