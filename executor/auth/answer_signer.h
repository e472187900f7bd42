#pragma once

// Signs the answers of a server's unary calls that came in a munge session (issue 47): a
// client that must not be fooled by whoever listens at its peer's address while the peer is
// down (agents and the native adapter of a nexec master) checks the proof
// (MungeAuth::Call's AnswerFrom). One interceptor for the whole server: no handler has to
// remember to sign, and calls that came without a session (the CLI's one-off credentials)
// cost nothing.

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "executor/auth/munge_auth.h"

namespace jc::nexec {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAnswerSigner(const MungeAuth& auth);

}  // namespace jc::nexec
