#include "jointcloud/v1/monitor.grpc.pb.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {

namespace v1 = ::jointcloud::v1;

std::vector<Route> MonitorRoutes(std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<v1::MonitorService::Stub> stub = v1::MonitorService::NewStub(channel);
  using S = v1::MonitorService::Stub;
  std::vector<Route> routes;
  routes.push_back({"GET", "/openapi/v1/centers/{ai_center_id}/usage", "monitor",
                    "The center's latest usage as its adapter reported it (Table 4)", nullptr,
                    v1::CenterUsage::descriptor(), JsonNames::kSnakeCase, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::GetCenterUsageRequest req;
                      req.set_ai_center_id(p[0]);
                      return CallUnary(stub.get(), &S::GetCenterUsage, req, JsonNames::kSnakeCase);
                    }});
  routes.push_back({"GET", "/openapi/v1/usage", "monitor", "The latest usage of every monitored center (Table 4)",
                    nullptr, v1::ListCenterUsageResponse::descriptor(), JsonNames::kSnakeCase, {},
                    [stub](const httplib::Request&, const std::vector<std::string>&) {
                      return CallUnary(stub.get(), &S::ListCenterUsage, v1::ListCenterUsageRequest(),
                                       JsonNames::kSnakeCase);
                    }});
  return routes;
}

}  // namespace jc::gateway
