#pragma once

// Who may call each gRPC method of the control plane at all (SPEC C6). Finer checks,
// on the object as stored, are the handlers': a job's project, the center an operator
// runs. A method missing here is refused, and the auth table test fails for it.

#include <memory>

#include "common/auth/auth_interceptor.h"

namespace jc::server {

std::shared_ptr<const auth::MethodAccess> ControlPlaneAccess();

}  // namespace jc::server
