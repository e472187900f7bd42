#include "services/monitor/monitor_service.h"

#include "common/auth/auth_interceptor.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/monitor.grpc.pb.h"

namespace jc::monitor {
namespace {

using grpc::ServerContext;
using grpc::Status;

class MonitorService final : public v1::MonitorService::Service {
 public:
  explicit MonitorService(Monitor* m) : m_(m) {}
  Status GetCenterUsage(ServerContext* ctx, const v1::GetCenterUsageRequest* req, v1::CenterUsage* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (req->ai_center_id().empty()) return Status(grpc::StatusCode::INVALID_ARGUMENT, "ai_center_id is required");
    return Reply(m_->Get(req->ai_center_id()), resp);
  }
  Status ListCenterUsage(ServerContext* ctx, const v1::ListCenterUsageRequest*,
                         v1::ListCenterUsageResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    for (auto& u : m_->List()) *resp->add_usage() = std::move(u);
    return Status::OK;
  }

 private:
  Monitor* m_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeMonitorService(Monitor* monitor) {
  return std::make_unique<MonitorService>(monitor);
}

}  // namespace jc::monitor
