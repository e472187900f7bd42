#include "executor/agent/agent_service.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "executor/agent/agent.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {
namespace {

// Starting a process as any user is the most a caller can do here: every call must carry
// a munge credential of the master's account (or root); the first line of each handler.
#define NEXEC_FROM_MASTER(method)                         \
  if (grpc::Status refused = FromMaster(ctx, method, *req); !refused.ok()) return refused

class AgentService final : public pb::Agent::Service {
 public:
  AgentService(Agent* agent, MungeAuth auth, uid_t master_uid)
      : agent_(agent), auth_(std::move(auth)), master_uid_(master_uid) {}
  grpc::Status Launch(grpc::ServerContext* ctx, const pb::LaunchRequest* req,
                      pb::LaunchResponse* resp) override {
    NEXEC_FROM_MASTER("Launch");
    auto pid = agent_->Launch(*req);
    if (!pid.ok()) return ToGrpcStatus(pid.status());
    resp->set_pid(*pid);
    return grpc::Status::OK;
  }
  grpc::Status LaunchBatch(grpc::ServerContext* ctx, const pb::LaunchBatchRequest* req,
                           pb::LaunchBatchResponse* resp) override {
    NEXEC_FROM_MASTER("LaunchBatch");
    for (const auto& launch : req->launches()) {
      absl::StatusOr<int> pid;
      try {
        pid = agent_->Launch(launch);
      } catch (const std::exception& e) {
        spdlog::error("launch of job {} threw: {}", launch.job_id(), e.what());
        pid = absl::InternalError(e.what());
      }
      pb::LaunchResult* r = resp->add_results();
      if (pid.ok()) {
        r->set_pid(*pid);
      } else {
        r->set_code(static_cast<int>(pid.status().code()));
        r->set_message(std::string(pid.status().message()));
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status Signal(grpc::ServerContext* ctx, const pb::SignalRequest* req,
                      pb::SignalResponse*) override {
    NEXEC_FROM_MASTER("Signal");
    return ToGrpcStatus(agent_->Signal(*req));
  }
  grpc::Status SendInput(grpc::ServerContext* ctx, const pb::InputRequest* req,
                         pb::InputResponse* resp) override {
    NEXEC_FROM_MASTER("SendInput");
    auto accepted = agent_->SendInput(*req);
    if (!accepted.ok()) return ToGrpcStatus(accepted.status());
    resp->set_accepted(*accepted);
    return grpc::Status::OK;
  }
  grpc::Status ReadLog(grpc::ServerContext* ctx, const pb::ReadLogRequest* req,
                       grpc::ServerWriter<pb::LogChunk>* writer) override {
    NEXEC_FROM_MASTER("ReadLog");
    constexpr int64_t kChunk = 1 << 20;
    int64_t offset = req->offset();
    while (true) {
      pb::ReadLogRequest at = *req;
      at.set_offset(offset);
      auto data = agent_->ReadLog(at, kChunk);
      if (!data.ok()) return ToGrpcStatus(data.status());
      if (data->empty()) return grpc::Status::OK;
      pb::LogChunk chunk;
      chunk.set_offset(offset);
      chunk.set_data(*data);
      if (!writer->Write(chunk)) return grpc::Status::OK;
      offset += static_cast<int64_t>(data->size());
    }
  }

 private:
  grpc::Status FromMaster(grpc::ServerContext* ctx, absl::string_view method,
                          const google::protobuf::Message& req) const {
    auto caller = auth_.Verify(ctx, method, req);
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    if (caller->root() || caller->uid == master_uid_) return grpc::Status::OK;
    spdlog::warn("refused {} from {} (uid {}): agents take calls only from the master", std::string(method), caller->user,
                 caller->uid);
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("agents take ", method, " only from the nexec master, not from ",
                                     caller->user));
  }
  Agent* agent_;
  const MungeAuth auth_;
  const uid_t master_uid_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeAgentService(Agent* agent, const MungeAuth& auth, uid_t master_uid) {
  return std::make_unique<AgentService>(agent, auth, master_uid);
}

}  // namespace jc::nexec
