#pragma once

// How Jointcloud's own services call each other: every call on an internal channel carries
// "authorization: Bearer <service secret>", which the receiving server's authenticator
// knows as the service principal. The secret is per process when all services run in one
// (random, never written down), or shared through --service_token_file when they run apart.

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include "absl/status/statusor.h"

namespace jc::auth {

using ClientInterceptors = std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>;

// Adds "authorization: Bearer <secret>" to every call that has no authorization of its own.
std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> MakeBearerInterceptor(std::string secret);

// A channel to `target` whose calls carry the service secret.
std::shared_ptr<grpc::Channel> ServiceChannel(const std::string& target,
                                              std::shared_ptr<grpc::ChannelCredentials> credentials,
                                              const std::string& secret);

// Reads a service secret from `path` (at least 32 characters, surrounding space trimmed).
absl::StatusOr<std::string> ReadServiceSecret(const std::string& path);

}  // namespace jc::auth
