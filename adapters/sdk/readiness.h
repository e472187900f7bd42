#pragma once

// Whether a replica's port answers (SPEC A17 readiness), probed by the adapter where it can
// reach the replica's host: a TCP connection within the deadline, or, with a path, an HTTP
// GET of it answered 2xx within the deadline.

#include <string>

#include "absl/time/time.h"

namespace jc::adapter {

bool EndpointReady(const std::string& host, int port, const std::string& path, absl::Duration deadline);

}  // namespace jc::adapter
