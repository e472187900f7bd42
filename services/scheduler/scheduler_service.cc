#include "services/scheduler/scheduler_service.h"

#include "common/auth/auth_interceptor.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/scheduler.grpc.pb.h"

namespace jc::scheduler {
namespace {

using grpc::ServerContext;
using grpc::Status;

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
    return Reply(s_->Plan(req->job()), resp);
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
