#pragma once

// The one place where absl::Status and grpc::Status are converted into each other.

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jc {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace jc

namespace jc {

// Ends a unary RPC handler: copies the value into the response, or converts the error.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = std::move(result).value();
  return grpc::Status::OK;
}

}  // namespace jc
