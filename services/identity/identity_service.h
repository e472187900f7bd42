#pragma once

#include <memory>

#include "common/audit/audit_log.h"
#include "services/identity/identity_store.h"

namespace grpc {
class Service;
}

namespace jc::identity {

// The gRPC edge of identities (jointcloud.v1.IdentityService).
std::unique_ptr<grpc::Service> MakeIdentityService(IdentityStore* identities, audit::AuditLog* audit);

}  // namespace jc::identity
