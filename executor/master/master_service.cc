#include "executor/master/master_service.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {
namespace {

using grpc::ServerContext;
using grpc::Status;

class MasterService final : public pb::Master::Service {
 public:
  explicit MasterService(Master* m) : m_(m) {}

  Status Submit(ServerContext*, const pb::SubmitRequest* req, pb::SubmitResponse* resp) override {
    auto id = m_->Submit(req->spec());
    if (!id.ok()) return ToGrpcStatus(id.status());
    resp->set_job_id(*id);
    return Status::OK;
  }
  Status GetJob(ServerContext*, const pb::JobRef* req, pb::Job* resp) override {
    return Reply(m_->GetJob(req->job_id()), resp);
  }
  Status ListJobs(ServerContext*, const pb::ListJobsRequest* req, pb::ListJobsResponse* resp) override {
    for (auto& j : m_->ListJobs(*req)) *resp->add_jobs() = std::move(j);
    return Status::OK;
  }
  Status Kill(ServerContext*, const pb::JobRef* req, pb::ControlResponse* resp) override {
    return Control(m_->Kill(req->job_id()), resp);
  }
  Status Suspend(ServerContext*, const pb::JobRef* req, pb::ControlResponse* resp) override {
    return Control(m_->Suspend(req->job_id()), resp);
  }
  Status Resume(ServerContext*, const pb::JobRef* req, pb::ControlResponse* resp) override {
    return Control(m_->Resume(req->job_id()), resp);
  }
  Status Requeue(ServerContext*, const pb::JobRef* req, pb::ControlResponse* resp) override {
    return Control(m_->Requeue(req->job_id()), resp);
  }
  Status ListHosts(ServerContext*, const pb::ListHostsRequest*, pb::ListHostsResponse* resp) override {
    for (auto& h : m_->ListHosts()) *resp->add_hosts() = std::move(h);
    return Status::OK;
  }
  Status ListQueues(ServerContext*, const pb::ListQueuesRequest*, pb::ListQueuesResponse* resp) override {
    for (auto& q : m_->ListQueues()) *resp->add_queues() = std::move(q);
    return Status::OK;
  }
  Status Heartbeat(ServerContext*, const pb::HeartbeatRequest* req,
                   pb::HeartbeatResponse* resp) override {
    return Reply(m_->Heartbeat(*req), resp);
  }
  Status Watch(ServerContext* ctx, const pb::WatchRequest* req,
               grpc::ServerWriter<pb::JobEvent>* writer) override {
    uint64_t since = req->since_cursor();
    std::vector<pb::JobEvent> batch;
    while (!ctx->IsCancelled()) {
      batch.clear();
      auto read = m_->events().WaitAfter(since, absl::Milliseconds(500), &batch);
      if (read == EventLog<pb::JobEvent>::Read::kClosed) {
        return Status(grpc::StatusCode::UNAVAILABLE, "master is shutting down");
      }
      if (read == EventLog<pb::JobEvent>::Read::kCompacted) {
        return Status(grpc::StatusCode::OUT_OF_RANGE,
                      "events after since_cursor were compacted; list jobs and watch from now");
      }
      for (const auto& e : batch) {
        if (!writer->Write(e)) return Status::OK;
        since = e.cursor();
      }
    }
    return Status::OK;
  }
  Status ReadLog(ServerContext* ctx, const pb::ReadLogRequest* req,
                 grpc::ServerWriter<pb::LogChunk>* writer) override {
    constexpr int64_t kChunk = 1 << 20;
    int64_t offset = req->offset();
    while (!ctx->IsCancelled()) {
      pb::ReadLogRequest at = *req;
      at.set_offset(offset);
      auto data = m_->ReadLog(at, kChunk);
      if (!data.ok()) return ToGrpcStatus(data.status());
      if (!data->empty()) {
        pb::LogChunk chunk;
        chunk.set_offset(offset);
        chunk.set_data(*data);
        if (!writer->Write(chunk)) return Status::OK;
        offset += static_cast<int64_t>(data->size());
        continue;
      }
      if (!req->follow()) return Status::OK;
      auto job = m_->GetJob(req->job_id());
      if (!job.ok() || job->state() == pb::DONE || job->state() == pb::EXIT) return Status::OK;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // follow: poll the file
    }
    return Status::OK;
  }

 private:
  static Status Control(absl::StatusOr<pb::Job> job, pb::ControlResponse* resp) {
    if (!job.ok()) return ToGrpcStatus(job.status());
    *resp->mutable_job() = std::move(job).value();
    return Status::OK;
  }
  Master* m_;
};

class GrpcAgentDialer final : public AgentDialer {
 public:
  absl::StatusOr<int> Launch(const std::string& address, const pb::LaunchRequest& req) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::LaunchResponse resp;
    grpc::Status s = Stub(address)->Launch(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::ALREADY_EXISTS) return 0;
    if (!s.ok()) return FromGrpcStatus(s);
    return resp.pid();
  }
  std::vector<absl::StatusOr<int>> LaunchBatch(
      const std::string& address, const std::vector<pb::LaunchRequest>& reqs) override {
    if (reqs.size() == 1) return {Launch(address, reqs[0])};
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::LaunchBatchRequest req;
    for (const auto& r : reqs) *req.add_launches() = r;
    pb::LaunchBatchResponse resp;
    grpc::Status s = Stub(address)->LaunchBatch(&ctx, req, &resp);
    std::vector<absl::StatusOr<int>> out;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (!s.ok()) {
        out.push_back(FromGrpcStatus(s));
      } else if (i >= static_cast<size_t>(resp.results_size())) {
        out.push_back(absl::InternalError("the agent answered fewer launches than were sent"));
      } else if (const pb::LaunchResult& r = resp.results(static_cast<int>(i));
                 r.code() == 0 || r.code() == static_cast<int>(absl::StatusCode::kAlreadyExists)) {
        out.push_back(r.pid());
      } else {
        out.push_back(absl::Status(static_cast<absl::StatusCode>(r.code()), r.message()));
      }
    }
    return out;
  }
  absl::Status Signal(const std::string& address, const pb::SignalRequest& req) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::SignalResponse resp;
    return FromGrpcStatus(Stub(address)->Signal(&ctx, req, &resp));
  }
  absl::StatusOr<std::string> ReadLog(const std::string& address, const pb::ReadLogRequest& req,
                                      int64_t max_bytes) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto reader = Stub(address)->ReadLog(&ctx, req);
    std::string out;
    pb::LogChunk chunk;
    while (static_cast<int64_t>(out.size()) < max_bytes && reader->Read(&chunk)) out += chunk.data();
    if (static_cast<int64_t>(out.size()) >= max_bytes) {
      ctx.TryCancel();
      out.resize(static_cast<size_t>(max_bytes));
      reader->Finish().IgnoreError();
      return out;
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return FromGrpcStatus(s);
    return out;
  }

 private:
  pb::Agent::Stub* Stub(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& stub = stubs_[address];
    if (!stub) {
      stub = pb::Agent::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    }
    return stub.get();
  }
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<pb::Agent::Stub>> stubs_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeMasterService(Master* master) {
  return std::make_unique<MasterService>(master);
}

std::unique_ptr<AgentDialer> MakeGrpcAgentDialer() { return std::make_unique<GrpcAgentDialer>(); }

}  // namespace jc::nexec
