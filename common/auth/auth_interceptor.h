#pragma once

// Authentication at the gRPC edge, once for every server of the control plane (and for the
// REST gateway, which forwards the caller's Authorization header over its channel, or to
// a direct call): an interceptor reads the `authorization` metadata of each call, asks the
// CallAdmission who it is and whether it may call the method, and records the outcome
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

#include "common/auth/call_admission.h"

namespace jc::auth {

// The metadata key the REST gateway puts on every gRPC call it makes for a REST request
// (CallFacts::via_rest).
inline constexpr char kViaRestMetadata[] = "x-jc-via-rest";

// Every call of a server passes `admission` (call_admission.h) before its handler runs.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAuthInterceptor(
    std::shared_ptr<const CallAdmission> admission);

// The decision for the call `context` belongs to; a call the interceptor never saw (and no
// DecidedCall carries) is refused.
CallDecision DecisionOf(const grpc::ServerContextBase* context);

// A handler called directly in this process (ADR 0014, local_call.h): while this lives,
// `context` carries `decision` as an intercepted call's context does.
class DecidedCall {
 public:
  DecidedCall(const grpc::ServerContextBase* context, CallDecision decision);
  ~DecidedCall();
  DecidedCall(const DecidedCall&) = delete;
  DecidedCall& operator=(const DecidedCall&) = delete;

 private:
  const grpc::ServerContextBase* context_;
};

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
