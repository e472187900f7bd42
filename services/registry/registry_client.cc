#include <grpcpp/grpcpp.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/registry.grpc.pb.h"
#include "services/registry/center_directory.h"

namespace jc::registry {
namespace {

class GrpcCenterDirectory final : public CenterDirectory {
 public:
  explicit GrpcCenterDirectory(std::function<std::shared_ptr<grpc::Channel>()> channel_source)
      : channel_source_(std::move(channel_source)) {}

  absl::StatusOr<v1::Center> GetCenter(const std::string& id) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetCenterRequest req;
    req.set_ai_center_id(id);
    v1::Center center;
    grpc::Status status = stub()->GetCenter(&ctx, req, &center);
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::UnavailableError(
          absl::StrCat("registry unreachable: ", status.error_message()));
    }
    if (!status.ok()) return FromGrpcStatus(status);
    return center;
  }

 private:
  v1::RegistryService::Stub* stub() {
    std::call_once(once_, [this] { stub_ = v1::RegistryService::NewStub(channel_source_()); });
    return stub_.get();
  }

  std::function<std::shared_ptr<grpc::Channel>()> channel_source_;
  std::once_flag once_;
  std::unique_ptr<v1::RegistryService::Stub> stub_;
};

}  // namespace

std::unique_ptr<CenterDirectory> MakeGrpcCenterDirectory(
    std::function<std::shared_ptr<grpc::Channel>()> channel_source) {
  return std::make_unique<GrpcCenterDirectory>(std::move(channel_source));
}

}  // namespace jc::registry
