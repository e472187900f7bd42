#include "services/registry/registry_service.h"

#include "common/auth/auth_interceptor.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/registry.grpc.pb.h"

namespace jc::registry {
namespace {

class RegistryService final : public v1::RegistryService::Service {
 public:
  explicit RegistryService(Registry* registry) : registry_(registry) {}

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

  grpc::Status WatchCenters(grpc::ServerContext* ctx, const v1::WatchCentersRequest* req,
                            grpc::ServerWriter<v1::CenterEvent>* writer) override {
    JC_GRPC_CALLER(caller, ctx);
    uint64_t since = req->since_revision();
    if (since > registry_->events().last_revision()) {
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                          "since_revision is ahead of the server; watch from 0");
    }
    if (since == 0) {
      // A fresh watcher first learns every center as a JOINED event at the current
      // revision, then follows changes from there (list-then-watch, as in Kubernetes).
      since = registry_->events().last_revision();
      v1::ListCentersRequest page;
      page.set_page_size(1000);
      do {
        auto listed = registry_->List(page);
        if (!listed.ok()) return ToGrpcStatus(listed.status());
        for (const auto& center : listed->centers()) {
          v1::CenterEvent event;
          event.set_revision(since);
          event.set_type(v1::CenterEvent::JOINED);
          *event.mutable_center() = center;
          event.set_previous_status(center.status());
          if (!writer->Write(event)) return grpc::Status::OK;
        }
        page.set_page_token(listed->next_page_token());
      } while (!page.page_token().empty());
    }
    std::vector<v1::CenterEvent> batch;
    while (!ctx->IsCancelled()) {
      batch.clear();
      auto read = registry_->events().WaitAfter(since, absl::Milliseconds(500), &batch);
      if (read == EventLog<v1::CenterEvent>::Read::kClosed) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down");
      }
      if (read == EventLog<v1::CenterEvent>::Read::kCompacted) {
        return grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                            "events after since_revision were compacted; watch from 0");
      }
      for (const auto& event : batch) {
        if (!writer->Write(event)) return grpc::Status::OK;
        since = event.revision();
      }
    }
    return grpc::Status::OK;
  }

 private:
  Registry* registry_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeRegistryService(Registry* registry) {
  return std::make_unique<RegistryService>(registry);
}

}  // namespace jc::registry
