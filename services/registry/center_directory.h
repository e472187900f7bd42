#pragma once

// How other services look centers up: directly when the registry runs in the same
// library (tests), or over gRPC (RegistryClient) in the server.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jointcloud/v1/registry.pb.h"

namespace grpc {
class Channel;
}

namespace jc::registry {

namespace v1 = ::jointcloud::v1;

class Registry;

class CenterDirectory {
 public:
  virtual ~CenterDirectory() = default;
  // NotFound when no such center is registered.
  virtual absl::StatusOr<::jointcloud::v1::Center> GetCenter(const std::string& id) = 0;
  // Every registered center, all pages.
  virtual absl::StatusOr<std::vector<::jointcloud::v1::Center>> ListCenters() = 0;
  // A sign of life on a center's behalf (the monitor reached its adapter); returns the
  // center's status afterwards.
  virtual absl::StatusOr<int> Heartbeat(const std::string& id, bool healthy) = 0;
};

// Calls a Registry object in the same process.
std::unique_ptr<CenterDirectory> MakeLocalCenterDirectory(Registry* registry);

// Calls jointcloud.v1.RegistryService over the channel `channel_source` returns (asked on
// first use, so an in-process channel can be made after the server starts).
std::unique_ptr<CenterDirectory> MakeGrpcCenterDirectory(
    std::function<std::shared_ptr<grpc::Channel>()> channel_source);

}  // namespace jc::registry
