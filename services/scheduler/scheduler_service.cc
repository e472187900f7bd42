#include "services/scheduler/scheduler_service.h"

#include "common/grpc_status.h"
#include "jointcloud/v1/scheduler.grpc.pb.h"

namespace jc::scheduler {
namespace {

using grpc::ServerContext;
using grpc::Status;

class SchedulerService final : public v1::SchedulerService::Service {
 public:
  explicit SchedulerService(Scheduler* s) : s_(s) {}

  Status GetAlgorithmScore(ServerContext*, const v1::GetAlgorithmScoreRequest* req,
                           v1::GetAlgorithmScoreResponse* resp) override {
    auto score = s_->AlgorithmScore(req->algorithm_id(), req->center_id(), req->resource_spec_id());
    if (score.ok()) resp->set_score(*score);
    return ToGrpcStatus(score.status());
  }
  Status EvaluateScore(ServerContext*, const v1::EvaluateScoreRequest* req, v1::EvaluateScoreResponse* resp) override {
    auto score = s_->EvaluateScore(req->center_id(), {req->algorithm_ids().begin(), req->algorithm_ids().end()},
                                   {req->algorithm_scores().begin(), req->algorithm_scores().end()},
                                   req->weight_profile());
    if (score.ok()) resp->set_score(*score);
    return ToGrpcStatus(score.status());
  }
  Status ListAlgorithms(ServerContext*, const v1::ListAlgorithmsRequest*, v1::ListAlgorithmsResponse* resp) override {
    for (auto& a : s_->ListAlgorithms()) *resp->add_algorithms() = std::move(a);
    return Status::OK;
  }
  Status ListWeightProfiles(ServerContext*, const v1::ListWeightProfilesRequest*,
                            v1::ListWeightProfilesResponse* resp) override {
    for (auto& p : s_->ListWeightProfiles()) *resp->add_profiles() = std::move(p);
    return Status::OK;
  }
  Status PlanJob(ServerContext*, const v1::PlanJobRequest* req, v1::Placement* resp) override {
    return Reply(s_->Plan(req->job()), resp);
  }
  Status GetJobPlacement(ServerContext*, const v1::GetJobPlacementRequest* req, v1::Placement* resp) override {
    return Reply(s_->JobPlacement(req->job_id()), resp);
  }

 private:
  Scheduler* s_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeSchedulerService(Scheduler* scheduler) {
  return std::make_unique<SchedulerService>(scheduler);
}

}  // namespace jc::scheduler
