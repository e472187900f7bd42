#pragma once

// A unary handler of a service in this process, called without the wire (ADR 0014): no
// serialization, no completion queue, no hop to a gRPC server thread. The call passes the
// same CallAdmission the auth interceptor asks (authentication, method access, rate limit,
// audit), and the handler takes its caller the same way (JC_GRPC_CALLER), so a handler
// cannot tell, and need not care, which way its call came.
//
// Only for handlers that read nothing of their ServerContext but the caller: the context
// here belongs to no gRPC call (no peer, no deadline, never cancelled).

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "common/auth/auth_interceptor.h"

namespace jc::auth {

template <typename Service, typename Req, typename Resp>
grpc::Status CallInProcess(const CallAdmission& admission, const CallFacts& facts, Service* service,
                           grpc::Status (Service::*handler)(grpc::ServerContext*, const Req*, Resp*),
                           const Req& request, Resp* response) {
  grpc::ServerContext context;
  CallDecision decision = admission.Decide(facts);
  CallAdmission::DescribeRequest(decision, request);
  grpc::Status status;
  // What a gRPC call's parse would have refused (a string that is not UTF-8, from a header
  // or a path) is refused here, once the caller is known.
  absl::Status parsed = decision.caller.ok() ? CheckStringsAreUtf8(request) : absl::OkStatus();
  if (!parsed.ok()) {
    status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(parsed.message()));
  } else {
    DecidedCall carried(&context, decision);
    status = (service->*handler)(&context, &request, response);
  }
  admission.Conclude(decision, status);
  return status;
}

}  // namespace jc::auth
