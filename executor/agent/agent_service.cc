#include "executor/agent/agent_service.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <string>
#include <utility>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/call_deadlines.h"
#include "common/exec/attached_command.h"
#include "common/grpc_status.h"
#include "executor/agent/agent.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {
namespace {

// Starting a process as any user is the most a caller can do here: every call must carry
// a munge credential of the master's account (or root); the first line of each handler.
#define NEXEC_FROM_MASTER(method)                         \
  if (grpc::Status refused = FromMaster(ctx, method, *req); !refused.ok()) return refused

using ExecStream = grpc::ServerReaderWriter<pb::ExecFrame, pb::ExecFrame>;

// The master's stream as a command's caller (exec_stream::ExecPeer). Once the command's
// exit status is sent the master has 5 s to end the stream (it passes the caller's end on);
// then the call is ended here, so no command that ended holds a slot (an attacker helper
// held every slot of a host with commands that had exited).
class ExecFramePeer final : public exec_stream::ExecPeer {
 public:
  ExecFramePeer(grpc::ServerContext* ctx, ExecStream* stream, CallDeadlines* deadlines)
      : ctx_(ctx), stream_(stream), deadlines_(deadlines) {}
  ~ExecFramePeer() override { leave_.Forget(); }
  void Finished() override { leave_ = deadlines_->CancelAt(ctx_, absl::Now() + absl::Seconds(5)); }
  bool Started() override {
    pb::ExecFrame frame;
    frame.set_started(true);
    return stream_->Write(frame);
  }
  bool Send(std::string bytes) override {
    pb::ExecFrame frame;
    frame.set_data(std::move(bytes));
    return stream_->Write(frame);
  }
  void Close() override {}  // the stream ends with the call
  bool Receive(std::string* bytes, bool*) override {
    pb::ExecFrame frame;
    if (!stream_->Read(&frame)) return false;
    *bytes = std::move(*frame.mutable_data());
    return true;
  }
  bool Cancelled() override { return ctx_->IsCancelled(); }

 private:
  grpc::ServerContext* ctx_;
  ExecStream* stream_;
  CallDeadlines* deadlines_;
  CallDeadlines::Ticket leave_;
};

// Commands in tasks at once on one agent: each holds a thread of the agent's server while
// it runs, and the agent's own calls must find one.
constexpr int kMaxExecs = 32;

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
    std::vector<const pb::LaunchRequest*> launches;
    for (const auto& launch : req->launches()) launches.push_back(&launch);
    for (absl::StatusOr<int>& pid : agent_->LaunchBatch(launches)) {
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
  grpc::Status Lead(grpc::ServerContext* ctx, const pb::LeadRequest* req, pb::LeadResponse* resp) override {
    NEXEC_FROM_MASTER("agent.Lead");
    auto term = agent_->Lead(*req);
    if (!term.ok()) return ToGrpcStatus(term.status());
    resp->set_master_term(*term);
    return grpc::Status::OK;
  }
  grpc::Status SendInput(grpc::ServerContext* ctx, const pb::InputRequest* req,
                         pb::InputResponse* resp) override {
    NEXEC_FROM_MASTER("agent.SendInput");  // named for the agent: a master's credential is not one
    auto accepted = agent_->SendInput(*req);
    if (!accepted.ok()) return ToGrpcStatus(accepted.status());
    resp->set_accepted(*accepted);
    return grpc::Status::OK;
  }
  // A command in a running task (nexec exec): the master's first frame says which and
  // what, signed by the master; then the exec stream both ways (exec_stream::PumpAttached).
  grpc::Status Exec(grpc::ServerContext* ctx, ExecStream* stream) override {
    // The master (or root), proven before anything is read: nobody else may make this
    // handler wait (an attacker helper held every thread with silent streams).
    auto opening = auth_.VerifyStreamOpening(ctx);
    if (!opening.ok()) return ToGrpcStatus(opening.status());
    if (!opening->caller.root() && opening->caller.uid != master_uid_) return Refuse("Exec", opening->caller);
    if (execs_.fetch_add(1) >= kMaxExecs) {
      execs_.fetch_sub(1);
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("this host runs ", kMaxExecs, " commands in tasks already; try again later"));
    }
    struct Release {
      std::atomic<int>& n;
      ~Release() { n.fetch_sub(1); }
    } release{execs_};
    pb::ExecFrame first;
    {
      CallDeadlines::Ticket waiting = deadlines_.CancelAt(ctx, absl::Now() + absl::Seconds(10));
      if (!stream->Read(&first) || !first.has_start()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "an exec stream starts with what to run (start)");
      }
    }
    if (auto s = MungeAuth::CheckBinding(*opening, "agent.Exec", first); !s.ok()) return ToGrpcStatus(s);
    std::string key;
    auto started = agent_->StartExec(first.start(), &key);
    if (!started.ok()) return ToGrpcStatus(started.status());
    ExecFramePeer peer(ctx, stream, &deadlines_);
    exec_stream::PumpAttached(*started, peer, [this, &key] { return agent_->TaskRuns(key); });
    return grpc::Status::OK;
  }
  grpc::Status ReadLog(grpc::ServerContext* ctx, const pb::ReadLogRequest* req,
                       grpc::ServerWriter<pb::LogChunk>* writer) override {
    NEXEC_FROM_MASTER("agent.ReadLog");
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
    return Refuse(method, *caller);
  }
  static grpc::Status Refuse(absl::string_view method, const Caller& caller) {
    spdlog::warn("refused {} from {} (uid {}): agents take calls only from the master", std::string(method), caller.user,
                 caller.uid);
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("agents take ", method, " only from the nexec master, not from ", caller.user));
  }
  Agent* agent_;
  const MungeAuth auth_;
  const uid_t master_uid_;
  std::atomic<int> execs_{0};
  CallDeadlines deadlines_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeAgentService(Agent* agent, const MungeAuth& auth, uid_t master_uid) {
  return std::make_unique<AgentService>(agent, auth, master_uid);
}

}  // namespace jc::nexec
