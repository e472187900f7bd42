#pragma once

// The gRPC edge of the adapter SDK: jointcloud.adapter.v1.Adapter over an AdapterCore.

#include <memory>

namespace grpc {
class Service;
}

namespace jc::adapter {

class AdapterCore;
std::unique_ptr<grpc::Service> MakeAdapterService(AdapterCore* core);

}  // namespace jc::adapter
