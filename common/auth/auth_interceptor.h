#pragma once

// Authentication at the gRPC edge, once for every server of the control plane (and for the
// REST gateway, which forwards the caller's Authorization header over its channel): an
// interceptor reads the `authorization` metadata of each call, asks the Authenticator who
// it is, checks the method's coarse access level (MethodAccess), and records the outcome
// for the call. Handlers take the caller with JC_GRPC_CALLER (DecisionOf): a call the interceptor did
// not admit, or one it never saw, has no caller, so a handler cannot act for nobody.
//
// gRPC C++ server interceptors cannot end a call themselves (grpc/grpc#24017), hence the
// outcome is handed to the handler; every handler's first line takes its caller, and the
// auth table test calls every method without and with bad credentials.

#include <memory>
#include <string>

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/audit/audit_log.h"
#include "common/auth/principal.h"
#include "common/auth/rate_limiter.h"

namespace jc::auth {

// Who may call a method at all; finer checks (the object's project, the center a user
// operates) are the handler's, on the object as stored.
enum class Access {
  kPublic,         // no credentials needed (health checks)
  kAuthenticated,  // any known caller
  kAdmin,          // federation admins and Jointcloud's own services
};

struct MethodRule {
  Access access;
  // A mutation: its calls by users (not by Jointcloud's services) get an audit row, in the
  // transaction of the change, or on their own when they changed nothing.
  bool audited = false;
};

// Full method name ("/jointcloud.v1.JobService/CreateTrainJob") -> rule. A method not in
// the table is refused (PERMISSION_DENIED): a new method cannot be open by omission.
using MethodAccess = absl::flat_hash_map<std::string, MethodRule>;

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // `authorization` is the header's value ("Bearer ..."), empty when there is none.
  // Unauthenticated, with a reason a client can act on, when it proves no one.
  virtual absl::StatusOr<Principal> Authenticate(absl::string_view authorization) const = 0;
};

// `limiter`, when given, holds each user to its request rate (federation admins and
// Jointcloud's services are not limited). `audit`, when given, records the audited
// methods' calls. With `service_needs_certificate` (a server with TLS), the service secret
// counts only from a peer that presented a client certificate the CA signed, or from this
// process's own in-process channels.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAuthInterceptor(
    std::shared_ptr<const Authenticator> authenticator, std::shared_ptr<const MethodAccess> access,
    std::shared_ptr<RateLimiter> limiter = nullptr, std::shared_ptr<audit::AuditLog> audit = nullptr,
    bool service_needs_certificate = false);

// What the interceptor decided for a call: its caller, or why it was refused
// (UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED); and its audit, when audited.
struct CallDecision {
  absl::StatusOr<std::shared_ptr<const Principal>> caller;
  std::shared_ptr<audit::CallAudit> audit;
};

// The decision for the call `context` belongs to; a call the interceptor never saw is
// refused.
CallDecision DecisionOf(const grpc::ServerContextBase* context);

}  // namespace jc::auth

// First line of a handler: binds `var` to the caller or returns the refusal as a gRPC
// status; while the handler runs, the call's audit row rides along with the first
// transaction that writes (store::RiderScope).
#define JC_GRPC_CALLER(var, context)                                                                  \
  auto var##_decision_ = ::jc::auth::DecisionOf(context);                                             \
  if (!var##_decision_.caller.ok()) return ::jc::ToGrpcStatus(var##_decision_.caller.status());      \
  ::jc::store::RiderScope var##_audit_rides_(var##_decision_.audit ? &var##_decision_.audit->rider    \
                                                                    : nullptr);                       \
  [[maybe_unused]] const ::jc::auth::Principal& var = **var##_decision_.caller
