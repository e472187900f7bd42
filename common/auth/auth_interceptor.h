#pragma once

// Authentication at the gRPC edge, once for every server of the control plane (and for the
// REST gateway, which forwards the caller's Authorization header over its channel): an
// interceptor reads the `authorization` metadata of each call, asks the Authenticator who
// it is, checks the method's coarse access level (MethodAccess), and records the outcome
// for the call. Handlers take the caller with CallerOf(context): a call the interceptor did
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

// Full method name ("/jointcloud.v1.JobService/CreateTrainJob") -> access. A method not in
// the table is refused (PERMISSION_DENIED): a new method cannot be open by omission.
using MethodAccess = absl::flat_hash_map<std::string, Access>;

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // `authorization` is the header's value ("Bearer ..."), empty when there is none.
  // Unauthenticated, with a reason a client can act on, when it proves no one.
  virtual absl::StatusOr<Principal> Authenticate(absl::string_view authorization) const = 0;
};

// `limiter`, when given, holds each user to its request rate (federation admins and
// Jointcloud's services are not limited).
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAuthInterceptor(
    std::shared_ptr<const Authenticator> authenticator, std::shared_ptr<const MethodAccess> access,
    std::shared_ptr<RateLimiter> limiter = nullptr);

// The caller of the call `context` belongs to, as the interceptor admitted it; otherwise
// the reason it was refused (UNAUTHENTICATED or PERMISSION_DENIED).
absl::StatusOr<std::shared_ptr<const Principal>> CallerOf(const grpc::ServerContextBase* context);

}  // namespace jc::auth

// First line of a handler: binds `var` to the caller or returns the refusal as a gRPC status.
#define JC_GRPC_CALLER(var, context)                                  \
  auto var##_or_ = ::jc::auth::CallerOf(context);                     \
  if (!var##_or_.ok()) return ::jc::ToGrpcStatus(var##_or_.status()); \
  [[maybe_unused]] const ::jc::auth::Principal& var = **var##_or_
