#include "services/registry/registry_service.h"

#include "common/auth/auth_interceptor.h"
#include "common/auth/watch_admission.h"
#include "common/grpc_status.h"
#include "common/timestamp.h"
#include "jointcloud/v1/registry.grpc.pb.h"
#include "services/registry/center_watch.h"

namespace jc::registry {
namespace {

class RegistryService final : public v1::RegistryService::WithCallbackMethod_WatchCenters<v1::RegistryService::Service> {
 public:
  RegistryService(Registry* registry, WatchHub* hub) : registry_(registry), hub_(hub) {}

  grpc::Status CreateCenter(grpc::ServerContext* ctx, const v1::CreateCenterRequest* req,
                            v1::Center* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(registry_->Create(req->center()), resp);
  }
  grpc::Status GetCenter(grpc::ServerContext* ctx, const v1::GetCenterRequest* req,
                         v1::Center* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(registry_->Get(req->ai_center_id()), resp);
  }
  grpc::Status UpdateCenter(grpc::ServerContext* ctx, const v1::UpdateCenterRequest* req,
                            v1::Center* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (auto s = auth::NeedOperator(caller, req->center().ai_center_id(), "updating a center"); !s.ok()) {
      return ToGrpcStatus(s);
    }
    return Reply(registry_->Update(req->center(), req->update_mask()), resp);
  }
  grpc::Status DeleteCenter(grpc::ServerContext* ctx, const v1::DeleteCenterRequest* req,
                            google::protobuf::Empty*) override {
    JC_GRPC_CALLER(caller, ctx);
    return ToGrpcStatus(registry_->Delete(req->ai_center_id()));
  }
  grpc::Status ListCenters(grpc::ServerContext* ctx, const v1::ListCentersRequest* req,
                           v1::ListCentersResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(registry_->List(*req), resp);
  }
  grpc::Status ReportHeartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                               v1::HeartbeatResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (auto s = auth::NeedOperator(caller, req->ai_center_id(), "reporting a center's heartbeat"); !s.ok()) {
      return ToGrpcStatus(s);
    }
    auto status = registry_->Heartbeat(req->ai_center_id(), !req->has_healthy() || req->healthy());
    if (!status.ok()) return ToGrpcStatus(status.status());
    resp->set_status(*status);
    return grpc::Status::OK;
  }

  // A center's adapter key: its operator (who runs the adapter) or an admin. Audited as
  // every change is; the key itself is in the answer only.
  grpc::Status IssueAdapterKey(grpc::ServerContext* ctx, const v1::IssueAdapterKeyRequest* req,
                               v1::IssueAdapterKeyResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (auto s = auth::NeedOperator(caller, req->ai_center_id(), "issuing a center's adapter key"); !s.ok()) {
      return ToGrpcStatus(s);
    }
    auto issued = registry_->IssueAdapterKey(req->ai_center_id());
    if (!issued.ok()) return ToGrpcStatus(issued.status());
    resp->set_ai_center_id(req->ai_center_id());
    resp->set_adapter_key(issued->key);
    if (issued->previous_valid_until) *resp->mutable_previous_valid_until() = ToTimestamp(*issued->previous_valid_until);
    return grpc::Status::OK;
  }

  // On the callback API, driven by the hub: an open watch holds no request thread.
  grpc::ServerWriteReactor<v1::CenterEvent>* WatchCenters(grpc::CallbackServerContext* ctx,
                                                          const v1::WatchCentersRequest* req) override {
    return auth::StartWatch<v1::CenterEvent>(
        hub_, ctx, "another centers watch",
        [&](std::shared_ptr<const auth::Principal>) -> absl::StatusOr<std::unique_ptr<WatchFeed<v1::CenterEvent>>> {
          return MakeCenterWatchFeed(registry_, *req);
        });
  }

 private:
  Registry* registry_;
  WatchHub* hub_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeRegistryService(Registry* registry, WatchHub* watches) {
  return std::make_unique<RegistryService>(registry, watches);
}

}  // namespace jc::registry
