#pragma once

// The gRPC edge of the adapter SDK: jointcloud.adapter.v1.Adapter over an AdapterCore.

#include <memory>
#include <string>

namespace grpc {
class Service;
}

namespace jc::adapter {

class AdapterCore;
// `center_key_file`: where the center's adapter key is read at each GetCenterInfo that
// carries a challenge (empty: the adapter proves nothing).
std::unique_ptr<grpc::Service> MakeAdapterService(AdapterCore* core, std::string center_key_file = "");

}  // namespace jc::adapter
