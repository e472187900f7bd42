#include "services/jobs/job_service.h"

#include <algorithm>

#include "common/grpc_status.h"
#include "jointcloud/v1/jobs.grpc.pb.h"

namespace jc::jobs {
namespace {

using grpc::ServerContext;
using grpc::Status;

constexpr size_t kLogChunk = 64 << 10;

class JobService final : public v1::JobService::Service {
 public:
  explicit JobService(JobManager* m) : m_(m) {}

  Status CreateTrainJob(ServerContext*, const v1::CreateTrainJobRequest* req,
                        v1::CreateTrainJobResponse* resp) override {
    return Reply(m_->Create(*req), resp);
  }
  Status StopTrainJob(ServerContext*, const v1::StopTrainJobRequest* req, v1::StopTrainJobResponse*) override {
    return ToGrpcStatus(m_->StopJob(req->job_id()));
  }
  Status GetTrainJob(ServerContext*, const v1::GetTrainJobRequest* req, v1::TrainJob* resp) override {
    return Reply(m_->Get(req->job_id()), resp);
  }
  Status ListTrainJobs(ServerContext*, const v1::ListTrainJobsRequest* req, v1::ListTrainJobsResponse* resp) override {
    return Reply(m_->List(*req), resp);
  }
  Status GetReplicaLog(ServerContext*, const v1::GetReplicaLogRequest* req, v1::GetReplicaLogResponse* resp) override {
    auto url = m_->LogUrl(req->job_id(), req->task_index(), req->replica_index());
    if (url.ok()) resp->set_log_url(*url);
    return ToGrpcStatus(url.status());
  }
  Status ReadReplicaLog(ServerContext* ctx, const v1::ReadReplicaLogRequest* req,
                        grpc::ServerWriter<v1::LogChunk>* writer) override {
    auto log = m_->ReadLog(req->job_id(), req->task_index(), req->replica_index());
    if (!log.ok()) return ToGrpcStatus(log.status());
    for (size_t at = static_cast<size_t>(std::max<int64_t>(0, req->offset())); at < log->size(); at += kLogChunk) {
      if (ctx->IsCancelled()) return Status::CANCELLED;
      v1::LogChunk chunk;
      chunk.set_offset(static_cast<int64_t>(at));
      chunk.set_data(log->substr(at, kLogChunk));
      if (!writer->Write(chunk)) break;
    }
    return Status::OK;
  }

 private:
  JobManager* m_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeJobService(JobManager* jobs) { return std::make_unique<JobService>(jobs); }

}  // namespace jc::jobs
