#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "jointcloud/v1/scheduler.grpc.pb.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {

namespace v1 = ::jointcloud::v1;

namespace {

// An array query parameter, given repeated (?a=x&a=y) or comma-separated (?a=x,y).
std::vector<std::string> QueryList(const httplib::Request& r, const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < r.get_param_value_count(name.c_str()); ++i) {
    for (absl::string_view part : absl::StrSplit(r.get_param_value(name.c_str(), i), ',', absl::SkipWhitespace())) {
      out.emplace_back(part);
    }
  }
  return out;
}

}  // namespace

std::vector<Route> SchedulerRoutes(std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<v1::SchedulerService::Stub> stub = v1::SchedulerService::NewStub(channel);
  using S = v1::SchedulerService::Stub;
  std::vector<Route> routes;

  routes.push_back(
      {"GET", "/scheduler/algorithm/{algorithmId}/score/{centerId}", "scheduler",
       "The normalized score (0-100) one scheduling strategy gives a center (Appendix A.5)", nullptr,
       v1::GetAlgorithmScoreResponse::descriptor(), JsonNames::kCamelCase,
       {{"resourceSpecId", "string", "score for replicas of this spec (default: each center's cheapest offer)"}},
       [stub](const httplib::Request& r, const std::vector<std::string>& p) {
         v1::GetAlgorithmScoreRequest req;
         req.set_algorithm_id(p[0]);
         req.set_center_id(p[1]);
         req.set_resource_spec_id(QueryString(r, "resourceSpecId"));
         return CallUnary(stub.get(), &S::GetAlgorithmScore, req, JsonNames::kCamelCase);
       }});
  routes.push_back(
      {"GET", "/scheduler/evaluate/score/{centerId}", "scheduler",
       "The evaluation model's final score (formula 2) of a center from strategy scores (Appendix A.6)", nullptr,
       v1::EvaluateScoreResponse::descriptor(), JsonNames::kCamelCase,
       {{"algorithmIds", "string", "strategy ids, comma-separated or repeated"},
        {"algorithmScores", "string", "their scores 0-100, in the same order"},
        {"weightProfile", "string", "weight profile (default: default)"}},
       [stub](const httplib::Request& r, const std::vector<std::string>& p) {
         v1::EvaluateScoreRequest req;
         req.set_center_id(p[0]);
         for (auto& id : QueryList(r, "algorithmIds")) req.add_algorithm_ids(id);
         for (const auto& text : QueryList(r, "algorithmScores")) {
           int score = 0;
           if (!absl::SimpleAtoi(text, &score)) {
             return RestResult{absl::InvalidArgumentError(
                                   absl::StrCat("algorithmScores: \"", text, "\" is not an integer")),
                               ""};
           }
           req.add_algorithm_scores(score);
         }
         req.set_weight_profile(QueryString(r, "weightProfile"));
         return CallUnary(stub.get(), &S::EvaluateScore, req, JsonNames::kCamelCase);
       }});
  routes.push_back({"GET", "/openapi/v1/scheduler/algorithms", "scheduler",
                    "The scheduling strategies, with what each reads", nullptr,
                    v1::ListAlgorithmsResponse::descriptor(), JsonNames::kCamelCase, {},
                    [stub](const httplib::Request&, const std::vector<std::string>&) {
                      return CallUnary(stub.get(), &S::ListAlgorithms, v1::ListAlgorithmsRequest(),
                                       JsonNames::kCamelCase);
                    }});
  routes.push_back({"GET", "/openapi/v1/scheduler/weight-profiles", "scheduler",
                    "The evaluation model's named weight profiles", nullptr,
                    v1::ListWeightProfilesResponse::descriptor(), JsonNames::kCamelCase, {},
                    [stub](const httplib::Request&, const std::vector<std::string>&) {
                      return CallUnary(stub.get(), &S::ListWeightProfiles, v1::ListWeightProfilesRequest(),
                                       JsonNames::kCamelCase);
                    }});
  routes.push_back({"GET", "/openapi/v1/trainjob/{jobId}/placement", "scheduler",
                    "Why a submitted job went where it did: its latest placement, with every center's filter "
                    "or scores, weights and total",
                    nullptr, v1::Placement::descriptor(), JsonNames::kCamelCase, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::GetJobPlacementRequest req;
                      req.set_job_id(p[0]);
                      return CallUnary(stub.get(), &S::GetJobPlacement, req, JsonNames::kCamelCase);
                    }});
  routes.push_back({"POST", "/openapi/v1/scheduler/plan", "scheduler",
                    "Dry run: where a trainjob would go now, and for every center why (filter, scores, "
                    "weights, total)",
                    v1::CreateTrainJobRequest::descriptor(), v1::Placement::descriptor(), JsonNames::kCamelCase, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::PlanJobRequest req;
                      return IfOk(ParseBody(r, req.mutable_job()), [&] {
                        return CallUnary(stub.get(), &S::PlanJob, req, JsonNames::kCamelCase);
                      });
                    }});
  return routes;
}

}  // namespace jc::gateway
