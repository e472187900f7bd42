#include <grpcpp/grpcpp.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "jointcloud/v1/registry.grpc.pb.h"
#include "services/registry/center_directory.h"

namespace jc::registry {
namespace {

class GrpcCenterDirectory final : public CenterDirectory {
 public:
  explicit GrpcCenterDirectory(std::function<std::shared_ptr<grpc::Channel>()> channel_source)
      : channel_source_(std::move(channel_source)) {}

  absl::StatusOr<v1::Center> GetCenter(const std::string& id) override {
    v1::GetCenterRequest req;
    req.set_ai_center_id(id);
    v1::Center center;
    JC_RETURN_IF_ERROR(Call(&v1::RegistryService::Stub::GetCenter, req, &center));
    return center;
  }

  absl::StatusOr<std::vector<v1::Center>> ListCenters() override {
    std::vector<v1::Center> out;
    v1::ListCentersRequest req;
    req.set_page_size(1000);
    do {
      v1::ListCentersResponse page;
      JC_RETURN_IF_ERROR(Call(&v1::RegistryService::Stub::ListCenters, req, &page));
      for (auto& c : *page.mutable_centers()) out.push_back(std::move(c));
      req.set_page_token(page.next_page_token());
    } while (!req.page_token().empty());
    return out;
  }

  absl::StatusOr<int> Heartbeat(const std::string& id, bool healthy) override {
    v1::HeartbeatRequest req;
    req.set_ai_center_id(id);
    req.set_healthy(healthy);
    v1::HeartbeatResponse resp;
    JC_RETURN_IF_ERROR(Call(&v1::RegistryService::Stub::ReportHeartbeat, req, &resp));
    return resp.status();
  }

 private:
  // One unary call with a deadline; an unreachable registry is Unavailable.
  template <typename Req, typename Resp>
  absl::Status Call(grpc::Status (v1::RegistryService::Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                    const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status status = (stub()->*method)(&ctx, req, resp);
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::UnavailableError(absl::StrCat("registry unreachable: ", status.error_message()));
    }
    return status.ok() ? absl::OkStatus() : FromGrpcStatus(status);
  }

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
