#include "services/jobs/job_service.h"

#include <algorithm>

#include "common/auth/auth_interceptor.h"
#include "common/auth/project_scope.h"
#include "common/grpc_status.h"
#include "common/timestamp.h"
#include "jointcloud/v1/jobs.grpc.pb.h"
#include "services/jobs/job_access.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {
namespace {

using grpc::ServerContext;
using grpc::Status;

constexpr size_t kLogChunk = 64 << 10;

class JobService final : public v1::JobService::Service {
 public:
  explicit JobService(JobManager* m) : m_(m) {}

  Status CreateTrainJob(ServerContext* ctx, const v1::CreateTrainJobRequest* req,
                        v1::CreateTrainJobResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    v1::CreateTrainJobRequest admitted = *req;
    if (absl::Status s = AdmitCreate(caller, &admitted); !s.ok()) return ToGrpcStatus(s);
    // The job manager writes on its own thread: the audit row goes with the create's write.
    auto audit = caller_decision_.audit;
    std::optional<v1::AuditRecord> record;
    if (audit != nullptr) {
      audit->record.set_project(admitted.project());
      record = audit->record;
    }
    auto created = m_->Create(std::move(admitted), std::move(record));
    if (created.ok() && audit != nullptr) audit->rider.committed = true;
    return Reply(std::move(created), resp);
  }
  Status StopTrainJob(ServerContext* ctx, const v1::StopTrainJobRequest* req, v1::StopTrainJobResponse*) override {
    JC_GRPC_CALLER(caller, ctx);
    auto job = m_->Get(req->job_id());
    if (!job.ok()) return ToGrpcStatus(job.status());
    if (absl::Status s = CheckJobAccess(caller, *job, auth::ProjectRole::kMember); !s.ok()) return ToGrpcStatus(s);
    auto audit = caller_decision_.audit;
    std::optional<v1::AuditRecord> record;
    if (audit != nullptr) {
      audit->record.set_project(job->project());
      record = audit->record;
    }
    absl::Status stopped = m_->StopJob(req->job_id(), std::move(record));
    if (stopped.ok() && audit != nullptr) audit->rider.committed = true;
    return ToGrpcStatus(stopped);
  }
  Status GetTrainJob(ServerContext* ctx, const v1::GetTrainJobRequest* req, v1::TrainJob* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    auto job = m_->Get(req->job_id());
    if (job.ok()) {
      if (absl::Status s = CheckJobAccess(caller, *job, auth::ProjectRole::kViewer); !s.ok()) return ToGrpcStatus(s);
    }
    return Reply(std::move(job), resp);
  }
  Status ListTrainJobs(ServerContext* ctx, const v1::ListTrainJobsRequest* req, v1::ListTrainJobsResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(m_->List(*req, auth::VisibleProjects(caller)), resp);
  }
  Status GetReplicaLog(ServerContext* ctx, const v1::GetReplicaLogRequest* req, v1::GetReplicaLogResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (absl::Status s = Access(caller, req->job_id(), auth::ProjectRole::kViewer); !s.ok()) return ToGrpcStatus(s);
    auto url = m_->LogUrl(req->job_id(), req->task_index(), req->replica_index());
    if (url.ok()) resp->set_log_url(*url);
    return ToGrpcStatus(url.status());
  }
  Status ReadReplicaLog(ServerContext* ctx, const v1::ReadReplicaLogRequest* req,
                        grpc::ServerWriter<v1::LogChunk>* writer) override {
    JC_GRPC_CALLER(caller, ctx);
    if (absl::Status s = Access(caller, req->job_id(), auth::ProjectRole::kViewer); !s.ok()) return ToGrpcStatus(s);
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

  Status WatchTrainJobs(ServerContext* ctx, const v1::WatchTrainJobsRequest* req,
                        grpc::ServerWriter<v1::TrainJobEvent>* writer) override {
    JC_GRPC_CALLER(caller, ctx);
    if (req->heartbeat_seconds() < 0 || req->heartbeat_seconds() > 3600) {
      return Status(grpc::StatusCode::INVALID_ARGUMENT, "heartbeat_seconds: from 1 to 3600, or 0 for none");
    }
    const std::string& job_id = req->job_id();
    bool ended = false;  // a watched job that ended: the stream closes once it caught up
    if (!job_id.empty()) {
      auto job = m_->Get(job_id);
      if (!job.ok()) return ToGrpcStatus(job.status());
      if (absl::Status s = CheckJobAccess(caller, *job, auth::ProjectRole::kViewer); !s.ok()) return ToGrpcStatus(s);
      ended = job->status() == kCompleted || job->status() == kFailed;
    }
    JobEvents& events = m_->events();
    uint64_t since = req->since_revision();
    std::vector<v1::TrainJobEvent> batch;
    if (since > 0) {
      // The cursor is checked before the stream starts: a bad one is the call's status.
      auto first = events.Read(since, absl::ZeroDuration());
      if (!first.ok()) return ToGrpcStatus(first.status());
      batch = std::move(*first);
    } else {
      // List, then watch (as Kubernetes): the snapshot is at least as new as `since`, so
      // nothing between the two is missed (a change may be told twice).
      auto last = events.LastRevision();
      if (!last.ok()) return ToGrpcStatus(last.status());
      since = *last;
      absl::Status listed = Snapshot(caller, job_id, since, &batch);
      if (!listed.ok()) return ToGrpcStatus(listed);
      if (!job_id.empty() && !batch.empty()) ended = batch[0].status() == kCompleted || batch[0].status() == kFailed;
    }
    // Headers go out now: a REST gateway in front knows the watch was accepted.
    ctx->AddInitialMetadata("jc-watch", "accepted");
    writer->SendInitialMetadata();
    absl::Duration heartbeat = absl::Seconds(req->heartbeat_seconds());
    absl::Time last_write = absl::Now();
    while (!ctx->IsCancelled()) {
      for (const auto& event : batch) {
        if (event.type() != v1::TrainJobEvent::SNAPSHOT) since = event.revision();
        // The same rule as reads of jobs: VIEWER in the job's project (job_access.h).
        bool wanted = job_id.empty() ? MaySeeJobsOf(caller, event.project()) : event.job_id() == job_id;
        if (!wanted) continue;
        if (!writer->Write(event)) return Status::OK;
        last_write = absl::Now();
        if (!job_id.empty() && event.type() == v1::TrainJobEvent::ENDED) return Status::OK;
      }
      if (ended && batch.empty()) return Status::OK;  // replayed what the ended job had
      if (heartbeat > absl::ZeroDuration() && absl::Now() - last_write >= heartbeat) {
        v1::TrainJobEvent beat;
        beat.set_revision(since);
        beat.set_type(v1::TrainJobEvent::HEARTBEAT);
        *beat.mutable_at() = ToTimestamp(absl::Now());
        if (!writer->Write(beat)) return Status::OK;
        last_write = absl::Now();
      }
      absl::Duration wait = ended ? absl::ZeroDuration() : absl::Seconds(1);
      if (heartbeat > absl::ZeroDuration()) wait = std::min(wait, heartbeat);
      auto next = events.Read(since, wait);
      if (!next.ok()) return ToGrpcStatus(next.status());
      batch = std::move(*next);
    }
    return Status::CANCELLED;
  }

 private:
  // SNAPSHOT events at `revision`: of the job, or of every job not ended the caller sees.
  absl::Status Snapshot(const auth::Principal& caller, const std::string& job_id, uint64_t revision,
                        std::vector<v1::TrainJobEvent>* out) {
    auto add = [&](const v1::TrainJob& job) {
      v1::TrainJobEvent e;
      e.set_revision(revision);
      e.set_type(v1::TrainJobEvent::SNAPSHOT);
      e.set_job_id(job.job_id());
      e.set_status(job.status());
      e.set_status_reason(job.status_reason());
      e.set_project(job.project());
      e.set_name(job.name());
      *e.mutable_at() = job.updated_at();
      *e.mutable_job() = job;
      out->push_back(std::move(e));
    };
    if (!job_id.empty()) {
      auto job = m_->Get(job_id);
      if (!job.ok()) return job.status();
      add(*job);
      return absl::OkStatus();
    }
    for (const char* status : {kPending, kRunning}) {
      v1::ListTrainJobsRequest page;
      page.set_status(status);
      page.set_page_size(1000);
      do {
        auto listed = m_->List(page, auth::VisibleProjects(caller));
        if (!listed.ok()) return listed.status();
        for (const auto& job : listed->jobs()) add(job);
        page.set_page_token(listed->next_page_token());
      } while (!page.page_token().empty());
    }
    return absl::OkStatus();
  }

  // The caller's access to the job as stored (job_access.h).
  absl::Status Access(const auth::Principal& caller, const std::string& job_id, auth::ProjectRole need) {
    auto job = m_->Get(job_id);
    if (!job.ok()) return job.status();
    return CheckJobAccess(caller, *job, need);
  }

  JobManager* m_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeJobService(JobManager* jobs) { return std::make_unique<JobService>(jobs); }

}  // namespace jc::jobs
