#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "common/watch_hub.h"
#include "services/registry/registry.h"

namespace jc::registry {

// The gRPC edge of the registry (jointcloud.v1.RegistryService).
// Its watches run on `watches`.
std::unique_ptr<grpc::Service> MakeRegistryService(Registry* registry, WatchHub* watches);

}  // namespace jc::registry
