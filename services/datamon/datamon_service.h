#pragma once

#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "services/datamon/datamon.h"

namespace jc::datamon {

// The gRPC edge of the data monitor (jointcloud.v1.DatamonService).
std::unique_ptr<grpc::Service> MakeDatamonService(Datamon* datamon);

}  // namespace jc::datamon
