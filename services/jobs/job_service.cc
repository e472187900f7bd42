#include "services/jobs/job_service.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include <nlohmann/json.hpp>

#include "common/auth/api_token.h"
#include "common/auth/auth_interceptor.h"
#include "common/exec/exec_stream.h"
#include "common/auth/project_scope.h"
#include "common/auth/watch_admission.h"
#include "common/grpc_status.h"
#include "common/timestamp.h"
#include "jointcloud/v1/jobs.grpc.pb.h"
#include "services/jobs/job_access.h"
#include "services/jobs/job_watch.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {
namespace {

using grpc::ServerContext;
using grpc::Status;

constexpr size_t kLogChunk = 64 << 10;

// The job manager writes on its own thread: a call's audit row (of a change in `project`)
// goes with the change's write, and is marked committed once that is.
std::optional<v1::AuditRecord> AuditOf(const auth::CallDecision& decision, const std::string& project) {
  if (decision.audit == nullptr) return std::nullopt;
  decision.audit->record.set_project(project);
  return decision.audit->record;
}
// `change` went with the write: committed, or still under way when the caller's wait ran
// out (DEADLINE_EXCEEDED: the row is written with the change if the change ever is; the
// caller's thread neither waits on a hung store to write it a second time nor writes a
// second row under the same id).
void AuditCommitted(const auth::CallDecision& decision, const absl::Status& change) {
  if (!change.ok() && change.code() != absl::StatusCode::kDeadlineExceeded) return;
  if (decision.audit != nullptr) decision.audit->rider.committed = true;
}

class JobService final : public v1::JobService::WithCallbackMethod_WatchTrainJobs<v1::JobService::Service> {
 public:
  JobService(JobManager* m, WatchHub* hub, EndpointTickets* tickets) : m_(m), hub_(hub), tickets_(tickets) {}

  Status CreateTrainJob(ServerContext* ctx, const v1::CreateTrainJobRequest* req,
                        v1::CreateTrainJobResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    v1::CreateTrainJobRequest admitted = *req;
    if (absl::Status s = AdmitCreate(caller, &admitted); !s.ok()) return ToGrpcStatus(s);
    std::optional<v1::AuditRecord> record = AuditOf(caller_decision_, admitted.project());
    auto created = m_->Create(std::move(admitted), std::move(record));
    AuditCommitted(caller_decision_, created.status());
    return Reply(std::move(created), resp);
  }
  Status StopTrainJob(ServerContext* ctx, const v1::StopTrainJobRequest* req, v1::StopTrainJobResponse*) override {
    JC_GRPC_CALLER(caller, ctx);
    auto job = m_->Get(req->job_id());
    if (!job.ok()) return ToGrpcStatus(job.status());
    if (absl::Status s = CheckJobAccess(caller, *job, auth::ProjectRole::kMember); !s.ok()) return ToGrpcStatus(s);
    absl::Status stopped = m_->StopJob(req->job_id(), AuditOf(caller_decision_, job->project()));
    AuditCommitted(caller_decision_, stopped);
    return ToGrpcStatus(stopped);
  }
  Status ScaleTrainJob(ServerContext* ctx, const v1::ScaleTrainJobRequest* req,
                       v1::ScaleTrainJobResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    auto job = m_->Get(req->job_id());
    if (!job.ok()) return ToGrpcStatus(job.status());
    if (absl::Status s = CheckJobAccess(caller, *job, auth::ProjectRole::kMember); !s.ok()) return ToGrpcStatus(s);
    auto scaled = m_->ScaleJob(req->job_id(), req->task_index(), req->replica_number(), AuditOf(caller_decision_, job->project()));
    AuditCommitted(caller_decision_, scaled.status());
    return Reply(std::move(scaled), resp);
  }
  Status OpenEndpoint(ServerContext* ctx, const v1::OpenEndpointRequest* req, v1::OpenEndpointResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (tickets_ == nullptr) {
      return ToGrpcStatus(absl::FailedPreconditionError(
          "this control plane serves no endpoints: start the jobs service with --endpoint_address"));
    }
    if (req->has_exec()) {
      // A command in a replica: one replica's, no port, and a command that can run.
      if (!req->port_name().empty() || !req->path().empty() || req->all_replicas()) {
        return ToGrpcStatus(absl::InvalidArgumentError(
            "exec runs a command in one replica: leave portName, path and allReplicas out"));
      }
      if (absl::Status s = exec_stream::CheckCommand(req->exec().command()); !s.ok()) return ToGrpcStatus(s);
    } else if (req->port_name().empty()) {
      return ToGrpcStatus(absl::InvalidArgumentError("port_name: the port to open (TaskSpec.ports[].name), or exec"));
    }
    auto job = m_->Get(req->job_id());
    if (!job.ok()) return ToGrpcStatus(job.status());
    if (absl::Status s = CheckJobAccess(caller, *job, auth::ProjectRole::kMember); !s.ok()) return ToGrpcStatus(s);
    if (req->has_exec() && job->user_name() != caller.name) {
      // A command runs as the replica's account at its center, which may be the submitter's
      // own (a center's run_as maps users): another member of the project would act as
      // them (an attacker helper's finding). Ports stay open to every member.
      return ToGrpcStatus(absl::PermissionDeniedError(
          absl::StrCat("commands run in the replicas of job ", job->job_id(), " for its submitter (", job->user_name(),
                       ") alone: they run as the account its center gives them")));
    }
    if (req->has_exec() && caller_decision_.audit != nullptr) {
      // The audit row says which command, in which replica (the object names only the job):
      // the argv as JSON, so that two argvs never read alike, and past 400 bytes its
      // SHA-256 (the adapter logs the same) so that a tail cut off still identifies it.
      std::string argv = nlohmann::json(std::vector<std::string>(req->exec().command().begin(),
                                                                 req->exec().command().end()))
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      std::string shown = argv.size() > 400 ? absl::StrCat(argv.substr(0, 400), "... sha256=", auth::Sha256Hex(argv))
                                            : argv;
      caller_decision_.audit->record.set_object(absl::StrCat("job_id=", req->job_id(), " task=", req->task_index(),
                                                             " replica=", req->replica_index(), " exec=", shown,
                                                             req->exec().tty() ? " tty" : ""));
    }
    auto route = m_->RoutesToEndpoint(req->job_id(), req->task_index(),
                                      req->all_replicas() ? JobManager::kAllReplicas : req->replica_index(),
                                      req->port_name());
    if (!route.ok()) return ToGrpcStatus(route.status());
    // The audit row rides with the ticket's write, on this thread (common/audit).
    AuditOf(caller_decision_, job->project());
    auto ticket = tickets_->Issue(caller, job->project(), *req);
    if (ticket.ok()) AuditCommitted(caller_decision_, absl::OkStatus());
    return Reply(std::move(ticket), resp);
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

  // On the callback API, driven by the hub: an open watch holds no request thread.
  grpc::ServerWriteReactor<v1::TrainJobEvent>* WatchTrainJobs(grpc::CallbackServerContext* ctx,
                                                              const v1::WatchTrainJobsRequest* req) override {
    return auth::StartWatch<v1::TrainJobEvent>(
        hub_, ctx, "another job watch",
        [&](std::shared_ptr<const auth::Principal> caller) { return MakeJobWatchFeed(m_, std::move(caller), *req); });
  }

 private:
  // The caller's access to the job as stored (job_access.h).
  absl::Status Access(const auth::Principal& caller, const std::string& job_id, auth::ProjectRole need) {
    auto job = m_->Get(job_id);
    if (!job.ok()) return job.status();
    return CheckJobAccess(caller, *job, need);
  }

  JobManager* m_;
  WatchHub* hub_;
  EndpointTickets* tickets_;  // null: no endpoint listener
};

}  // namespace

std::unique_ptr<grpc::Service> MakeJobService(JobManager* jobs, WatchHub* watches, EndpointTickets* tickets) {
  return std::make_unique<JobService>(jobs, watches, tickets);
}

}  // namespace jc::jobs
