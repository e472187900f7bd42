#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "services/catalog/catalog.h"

namespace jc::catalog {

// The gRPC edge of the catalog (jointcloud.v1.CatalogService).
std::unique_ptr<grpc::Service> MakeCatalogService(Catalog* catalog);

}  // namespace jc::catalog
