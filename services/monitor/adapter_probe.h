#pragma once

// How the monitor asks a center's adapter for its figures. The real probe speaks
// jointcloud.adapter.v1 over gRPC (one cached channel per adapter address); unit tests
// use a fake.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jointcloud/adapter/v1/adapter.pb.h"

namespace jc::monitor {

namespace apb = ::jointcloud::adapter::v1;

class AdapterProbe {
 public:
  virtual ~AdapterProbe() = default;
  virtual absl::StatusOr<apb::Usage> GetUsage(const std::string& address, absl::Duration timeout) = 0;
  virtual absl::StatusOr<apb::CenterInfo> GetCenterInfo(const std::string& address, absl::Duration timeout) = 0;
};

std::unique_ptr<AdapterProbe> MakeGrpcAdapterProbe();

}  // namespace jc::monitor
