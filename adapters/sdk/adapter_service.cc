#include "adapters/sdk/adapter_service.h"

#include "common/replica_forgotten.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "adapters/sdk/exec_session.h"
#include "common/auth/api_token.h"
#include "common/exec/exec_stream.h"
#include <nlohmann/json.hpp>
#include "adapters/sdk/adapter_core.h"
#include "adapters/sdk/tunnel.h"
#include "common/auth/adapter_proof.h"
#include "spdlog/spdlog.h"
#include "common/event_stream.h"
#include "common/grpc_status.h"
#include "common/log_follow.h"
#include "jointcloud/adapter/v1/adapter.grpc.pb.h"

namespace jc::adapter {
namespace {

constexpr int kMaxSubmitBatch = 1000;  // as adapter.proto says

const EventStreamMessages kWatchMessages{
    "the adapter is shutting down",
    "events after since_cursor are no longer kept; read every replica with GetReplica and watch from the latest cursor"};

// Watch and WatchBatches: OUT_OF_RANGE for a cursor past the last event (another adapter's,
// or a store that lost events).
grpc::Status CheckWatchFrom(uint64_t since, uint64_t last) {
  if (since <= last) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "since_cursor is beyond the last event of this adapter");
}
// Tunnels open at once (each holds a server thread and one of its own): past it, refused.

class AdapterService final : public pb::Adapter::Service {
 public:
  AdapterService(AdapterCore* core, std::string center_key_file)
      : core_(core), center_key_file_(std::move(center_key_file)) {}

  grpc::Status GetCenterInfo(grpc::ServerContext*, const pb::GetCenterInfoRequest* req,
                             pb::CenterInfo* resp) override {
    grpc::Status s = Reply(core_->Info(), resp);
    if (!s.ok() || req->challenge().empty() || center_key_file_.empty()) return s;
    // The proof that this adapter holds its center's key (common/auth/adapter_proof.h),
    // for the id it reports, read from the file each time so a replaced key is taken.
    auto key = auth::ReadAdapterKeyFile(center_key_file_);
    if (!key.ok()) {
      spdlog::error("cannot prove this center to the control plane: {}", std::string(key.status().message()));
      return ToGrpcStatus(absl::FailedPreconditionError(
          absl::StrCat("the adapter cannot prove its center: ", key.status().message())));
    }
    resp->set_center_proof(auth::AdapterProof(*key, resp->ai_center_id(), req->challenge()));
    return grpc::Status::OK;
  }
  grpc::Status GetUsage(grpc::ServerContext*, const pb::GetUsageRequest*, pb::Usage* resp) override {
    return Reply(core_->Usage(), resp);
  }
  grpc::Status ListAccounting(grpc::ServerContext*, const pb::ListAccountingRequest* req,
                              pb::ListAccountingResponse* resp) override {
    auto at = [](const google::protobuf::Timestamp& t) {
      return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
    };
    if (!req->has_from() || !req->has_to() || at(req->to()) <= at(req->from())) {
      return ToGrpcStatus(absl::InvalidArgumentError("from and to are required, from before to"));
    }
    return Reply(core_->Accounting(at(req->from()), at(req->to())), resp);
  }
  grpc::Status SubmitReplica(grpc::ServerContext*, const pb::SubmitReplicaRequest* req,
                             pb::Replica* resp) override {
    return Reply(core_->Submit(*req), resp);
  }
  grpc::Status SubmitGang(grpc::ServerContext*, const pb::SubmitGangRequest* req,
                          pb::SubmitGangResponse* resp) override {
    auto replicas = core_->SubmitGang(*req);
    if (!replicas.ok()) return ToGrpcStatus(replicas.status());
    for (auto& r : *replicas) *resp->add_replicas() = std::move(r);
    return grpc::Status::OK;
  }
  grpc::Status SubmitReplicas(grpc::ServerContext*, const pb::SubmitReplicasRequest* req,
                              pb::SubmitReplicasResponse* resp) override {
    if (req->replicas_size() > kMaxSubmitBatch) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat(req->replicas_size(), " replicas in one SubmitReplicas; at most ",
                                       kMaxSubmitBatch, " a call"));
    }
    for (auto& result : core_->SubmitMany(*req)) {
      auto* out = resp->add_results();
      if (result.ok()) {
        *out->mutable_replica() = std::move(result).value();
      } else {
        out->set_code(static_cast<int>(result.status().code()));
        out->set_message(std::string(result.status().message()));
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status StopReplica(grpc::ServerContext*, const pb::ReplicaRef* req, pb::Replica* resp) override {
    return Reply(core_->StopReplica(req->key()), resp);
  }
  grpc::Status WithdrawReplica(grpc::ServerContext*, const pb::ReplicaRef* req, pb::Replica* resp) override {
    return Reply(core_->WithdrawReplica(req->key()), resp);
  }
  grpc::Status GetReplica(grpc::ServerContext* ctx, const pb::ReplicaRef* req, pb::Replica* resp) override {
    absl::StatusOr<pb::Replica> read = core_->Read(req->key());
    if (IsReplicaForgotten(read.status())) ctx->AddTrailingMetadata(kReplicaForgottenMetadata, "1");
    return Reply(std::move(read), resp);
  }
  grpc::Status OpenTunnel(grpc::ServerContext* ctx,
                          grpc::ServerReaderWriter<pb::TunnelFrame, pb::TunnelFrame>* stream) override {
    // Counted from the start: a stream that never names its replica holds a slot too.
    if (open_tunnels_.fetch_add(1) >= kMaxOpenTunnels) {
      open_tunnels_.fetch_sub(1);
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("this adapter has ", kMaxOpenTunnels, " tunnels open; try again when one closes"));
    }
    struct Release {
      std::atomic<int>* n;
      ~Release() { n->fetch_sub(1); }
    } release{&open_tunnels_};
    pb::TunnelFrame first;
    if (!stream->Read(&first)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a tunnel begins with a frame naming the replica and its port");
    }
    if (first.has_exec()) return Exec(ctx, first, stream);
    auto target = core_->TunnelTarget(first.key(), first.port_name());
    if (!target.ok()) return ToGrpcStatus(target.status());
    auto fd = DialEndpoint(target->first, target->second, absl::Seconds(5));
    if (!fd.ok()) return ToGrpcStatus(fd.status());
    if (!first.data().empty() &&
        ::send(*fd, first.data().data(), first.data().size(), MSG_NOSIGNAL) != static_cast<ssize_t>(first.data().size())) {
      ::close(*fd);
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the replica's port took none of the first bytes");
    }
    PumpTunnel(*fd, ctx, stream);
    return grpc::Status::OK;
  }
  // The center's own record of each command run in a replica, and for whom.
  static void LogExec(const pb::TunnelFrame& first) {
    const pb::ExecStart& start = first.exec();
    std::string argv = nlohmann::json(std::vector<std::string>(start.command().begin(), start.command().end()))
                           .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    spdlog::info("exec in replica {} for {}{}: {}{}", ReplicaName(first.key()), start.user(), start.tty() ? " (tty)" : "",
                 argv.substr(0, 400), argv.size() > 400 ? absl::StrCat("... sha256=", auth::Sha256Hex(argv)) : "");
  }
  // A command in the replica (`jcctl job exec`): relayed to the backend's scheduler, or
  // the backend's plan attached to the stream.
  grpc::Status Exec(grpc::ServerContext* ctx, const pb::TunnelFrame& first,
                    grpc::ServerReaderWriter<pb::TunnelFrame, pb::TunnelFrame>* stream) {
    const pb::ExecStart& start = first.exec();
    if (absl::Status s = exec_stream::CheckCommand(start.command()); !s.ok()) return ToGrpcStatus(s);
    if (!first.port_name().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a tunnel goes to a port or runs a command, not both");
    }
    auto request = core_->ExecTarget(first.key());
    if (!request.ok()) return ToGrpcStatus(request.status());
    request->command.assign(start.command().begin(), start.command().end());
    request->tty = start.tty();
    request->rows = start.rows();
    request->cols = start.cols();
    auto relay = core_->backend()->RelayExec(*request);
    if (relay.ok()) {
      LogExec(first);
      PumpRelay(**relay, ctx, stream);
      return grpc::Status::OK;
    }
    if (!absl::IsUnimplemented(relay.status())) return ToGrpcStatus(relay.status());
    auto plan = core_->backend()->PlanExec(*request);
    if (!plan.ok()) return ToGrpcStatus(plan.status());
    auto started = StartAttached(*plan, start.tty(), start.rows(), start.cols());
    if (!started.ok()) return ToGrpcStatus(started.status());
    LogExec(first);
    const pb::ReplicaKey key = first.key();
    PumpExec(*started, ctx, stream, [this, key] {
      auto now = core_->Get(key);
      return !now.ok() ? !absl::IsNotFound(now.status()) : now->state() == pb::REPLICA_RUNNING;
    });
    return grpc::Status::OK;
  }
  grpc::Status Watch(grpc::ServerContext* ctx, const pb::WatchRequest* req,
                     grpc::ServerWriter<pb::ReplicaEvent>* writer) override {
    if (grpc::Status s = CheckWatchFrom(req->since_cursor(), core_->events().last_revision()); !s.ok()) return s;
    return StreamEvents(ctx, core_->events(), req->since_cursor(), writer, kWatchMessages);
  }
  grpc::Status WatchBatches(grpc::ServerContext* ctx, const pb::WatchRequest* req,
                            grpc::ServerWriter<pb::ReplicaEvents>* writer) override {
    if (grpc::Status s = CheckWatchFrom(req->since_cursor(), core_->events().last_revision()); !s.ok()) return s;
    return StreamEventBatches(ctx, core_->events(), req->since_cursor(), writer, kWatchMessages);
  }
  grpc::Status ReadLog(grpc::ServerContext* ctx, const pb::ReadLogRequest* req,
                       grpc::ServerWriter<pb::LogChunk>* writer) override {
    constexpr int64_t kChunk = 1 << 20;
    LogFollow log;
    log.read = [&](int64_t offset) {
      pb::ReadLogRequest at = *req;
      at.set_offset(offset);
      return core_->ReadLog(at, kChunk);
    };
    log.ended = [&]() -> absl::StatusOr<bool> {
      auto replica = core_->Get(req->key());
      if (!replica.ok()) return replica.status();
      return replica->state() == pb::REPLICA_SUCCEEDED || replica->state() == pb::REPLICA_FAILED ||
             replica->state() == pb::REPLICA_STOPPED;
    };
    return FollowLog(ctx, req->offset(), req->follow(), log, writer);
  }
  grpc::Status ListImages(grpc::ServerContext*, const pb::ListImagesRequest*,
                          pb::ListImagesResponse* resp) override {
    for (auto& i : core_->Images()) *resp->add_images() = std::move(i);
    return grpc::Status::OK;
  }
  grpc::Status ListDatasets(grpc::ServerContext*, const pb::ListDatasetsRequest*,
                            pb::ListDatasetsResponse* resp) override {
    for (const auto& d : core_->center().datasets) *resp->add_datasets() = d;
    return grpc::Status::OK;
  }
  grpc::Status StageDataset(grpc::ServerContext*, const pb::StageDatasetRequest* req,
                            pb::StageDatasetResponse* resp) override {
    auto staged = core_->StageDataset(*req);
    if (!staged.ok()) return ToGrpcStatus(staged.status());
    *resp = std::move(*staged);
    return grpc::Status::OK;
  }
  grpc::Status StageImage(grpc::ServerContext*, const pb::StageImageRequest* req,
                          pb::StageImageResponse* resp) override {
    auto staged = core_->StageImage(*req);
    if (!staged.ok()) return ToGrpcStatus(staged.status());
    *resp = std::move(*staged);
    return grpc::Status::OK;
  }

 private:
  AdapterCore* core_;
  std::atomic<int> open_tunnels_{0};
  const std::string center_key_file_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeAdapterService(AdapterCore* core, std::string center_key_file) {
  return std::make_unique<AdapterService>(core, std::move(center_key_file));
}

}  // namespace jc::adapter
