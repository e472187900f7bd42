#pragma once

// A gRPC server reflection client for tests, as grpcurl uses the protocol: the services a
// server lists, and the methods of one of them from the file descriptor it sends.

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::testing {

// `metadata` goes with the call (e.g. {"authorization", "Bearer ..."}).
absl::StatusOr<std::vector<std::string>> ListServicesByReflection(
    const std::shared_ptr<grpc::Channel>& channel, const std::map<std::string, std::string>& metadata = {});

// The method names of `service` ("jointcloud.v1.JobService") as the server describes them.
absl::StatusOr<std::vector<std::string>> DescribeServiceByReflection(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace jc::testing
