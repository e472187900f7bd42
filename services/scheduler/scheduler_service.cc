#include "services/scheduler/scheduler_service.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/auth/auth_interceptor.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/scheduler.grpc.pb.h"
#include "services/jobs/validate_create.h"

namespace jc::scheduler {
namespace {

using grpc::ServerContext;
using grpc::Status;

// A plan is made for the caller, in a project the caller sees (VIEWER), never for the
// project or user a body names: it uses that project's images and datasets, so planning in
// another project would say which of its images and datasets exist. A body naming no
// project plans in the caller's only project (one of no project uses the federation's
// images and datasets only); admins plan for any project.
absl::Status AdmitPlan(const auth::Principal& caller, v1::CreateTrainJobRequest* job) {
  job->set_user_name(caller.name);
  job->set_created_user(caller.name);
  if (caller.IsAdmin()) return absl::OkStatus();
  if (job->project().empty()) {
    std::vector<std::string> mine;
    for (const auto& [project, role] : caller.projects) {
      if (role >= auth::ProjectRole::kViewer) mine.push_back(project);
    }
    if (mine.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("name the job's project: ", caller.name, " is in ", absl::StrJoin(mine, ", ")));
    }
    if (!mine.empty()) job->set_project(mine.front());
    return absl::OkStatus();
  }
  if (!caller.HasRole(job->project(), auth::ProjectRole::kViewer)) {
    return absl::PermissionDeniedError(
        absl::StrCat(caller.name, " is not in project \"", job->project(), "\" and cannot plan its jobs"));
  }
  return absl::OkStatus();
}

class SchedulerService final : public v1::SchedulerService::Service {
 public:
  SchedulerService(Scheduler* s, JobVisibility visible) : s_(s), visible_(std::move(visible)) {}

  Status GetAlgorithmScore(ServerContext* ctx, const v1::GetAlgorithmScoreRequest* req,
                           v1::GetAlgorithmScoreResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    auto score = s_->AlgorithmScore(req->algorithm_id(), req->center_id(), req->resource_spec_id());
    if (score.ok()) resp->set_score(*score);
    return ToGrpcStatus(score.status());
  }
  Status EvaluateScore(ServerContext* ctx, const v1::EvaluateScoreRequest* req, v1::EvaluateScoreResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    auto score = s_->EvaluateScore(req->center_id(), {req->algorithm_ids().begin(), req->algorithm_ids().end()},
                                   {req->algorithm_scores().begin(), req->algorithm_scores().end()},
                                   req->weight_profile());
    if (score.ok()) resp->set_score(*score);
    return ToGrpcStatus(score.status());
  }
  Status ListAlgorithms(ServerContext* ctx, const v1::ListAlgorithmsRequest*, v1::ListAlgorithmsResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    for (auto& a : s_->ListAlgorithms()) *resp->add_algorithms() = std::move(a);
    return Status::OK;
  }
  Status ListWeightProfiles(ServerContext* ctx, const v1::ListWeightProfilesRequest*,
                            v1::ListWeightProfilesResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    for (auto& p : s_->ListWeightProfiles()) *resp->add_profiles() = std::move(p);
    return Status::OK;
  }
  Status PlanJob(ServerContext* ctx, const v1::PlanJobRequest* req, v1::Placement* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    v1::CreateTrainJobRequest job = req->job();
    if (absl::Status admitted = AdmitPlan(caller, &job); !admitted.ok()) return ToGrpcStatus(admitted);
    // A plan is refused what a create is refused, with the same words: a duration past a
    // year, nanos past a second, a name a log line would take for two are no job to plan
    // (REST's plan comes here too).
    jobs::NormalizeCreate(job);
    if (absl::Status valid = jobs::ValidateCreate(job); !valid.ok()) return ToGrpcStatus(valid);
    return Reply(s_->Plan(job), resp);
  }
  Status GetJobPlacement(ServerContext* ctx, const v1::GetJobPlacementRequest* req, v1::Placement* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (!caller.IsAdmin()) {
      absl::Status may = visible_ ? visible_(caller, req->job_id())
                                  : absl::PermissionDeniedError(
                                        "job placements are shown to admins here: the jobs service runs elsewhere");
      if (!may.ok()) return ToGrpcStatus(may);
    }
    return Reply(s_->JobPlacement(req->job_id()), resp);
  }

 private:
  Scheduler* s_;
  JobVisibility visible_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeSchedulerService(Scheduler* scheduler, JobVisibility visible) {
  return std::make_unique<SchedulerService>(scheduler, std::move(visible));
}

}  // namespace jc::scheduler
