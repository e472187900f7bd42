#pragma once

#include <string>
#include <vector>

#include "services/gateway/route.h"

namespace jc::gateway {

// The OpenAPI 3.0 document of `routes`. Schemas come from the protobuf descriptors the
// routes carry, with the field names each route uses, so the document describes exactly
// what is served.
std::string BuildOpenApi(const std::vector<Route>& routes, const std::string& version);

}  // namespace jc::gateway
