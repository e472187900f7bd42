#include "jointcloud/v1/registry.grpc.pb.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {

namespace v1 = ::jointcloud::v1;

std::vector<Route> RegistryRoutes(std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<v1::RegistryService::Stub> stub = v1::RegistryService::NewStub(channel);
  using S = v1::RegistryService::Stub;
  const auto* center = v1::Center::descriptor();
  const std::string base = "/openapi/v1/centers";
  std::vector<Route> routes;

  routes.push_back({"POST", base, "centers", "Register a center (Tables 1 and 2)", center, center,
                    JsonNames::kSnakeCase, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::CreateCenterRequest req;
                      return IfOk(ParseBody(r, req.mutable_center()), [&] {
                        return CallUnary(stub.get(), &S::CreateCenter, req, JsonNames::kSnakeCase);
                      });
                    }});
  routes.push_back(
      {"GET", base, "centers", "List centers, paged, by region and status", nullptr,
       v1::ListCentersResponse::descriptor(), JsonNames::kSnakeCase,
       {{"region", "string", "only centers in this region"},
        {"status", "integer", "0 unavailable, 1 available, 2 unknown"},
        {"page_size", "integer", "items per page (default 100, at most 1000)"},
        {"page_token", "string", "next_page_token of the previous page"}},
       [stub](const httplib::Request& r, const std::vector<std::string>&) {
         v1::ListCentersRequest req;
         req.set_region(QueryString(r, "region"));
                  int32_t status = -1;
         absl::Status s = QueryInt(r, "status", &status);
         if (s.ok() && r.has_param("status")) req.set_status(status);
         if (s.ok()) s = ReadPaging(r, &req);
         return IfOk(s, [&] {
           return CallUnary(stub.get(), &S::ListCenters, req, JsonNames::kSnakeCase);
         });
       }});
  routes.push_back({"GET", base + "/{ai_center_id}", "centers", "Get a center", nullptr, center,
                    JsonNames::kSnakeCase, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::GetCenterRequest req;
                      req.set_ai_center_id(p[0]);
                      return CallUnary(stub.get(), &S::GetCenter, req, JsonNames::kSnakeCase);
                    }});
  auto update = [stub](bool partial) {
    return [stub, partial](const httplib::Request& r, const std::vector<std::string>& p) {
      v1::UpdateCenterRequest req;
      absl::Status s = ParseBody(r, req.mutable_center(), partial ? req.mutable_update_mask() : nullptr);
      if (s.ok() && !req.center().ai_center_id().empty() && req.center().ai_center_id() != p[0]) {
        s = absl::InvalidArgumentError("ai_center_id in the body differs from the one in the path");
      }
      req.mutable_center()->set_ai_center_id(p[0]);
      return IfOk(s, [&] {
        return CallUnary(stub.get(), &S::UpdateCenter, req, JsonNames::kSnakeCase);
      });
    };
  };
  routes.push_back({"PATCH", base + "/{ai_center_id}", "centers",
                    "Change the fields the body names", center, center, JsonNames::kSnakeCase, {},
                    update(true)});
  routes.push_back({"PUT", base + "/{ai_center_id}", "centers",
                    "Replace every updatable field", center, center, JsonNames::kSnakeCase, {},
                    update(false)});
  routes.push_back({"DELETE", base + "/{ai_center_id}", "centers", "Remove a center (it leaves)",
                    nullptr, nullptr, JsonNames::kSnakeCase, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::DeleteCenterRequest req;
                      req.set_ai_center_id(p[0]);
                      return CallUnary(stub.get(), &S::DeleteCenter, req, JsonNames::kSnakeCase,
                                       false);
                    }});
  routes.push_back(
      {"POST", base + "/{ai_center_id}/heartbeat", "centers",
       "Report the center alive (body {\"healthy\": false} reports it unavailable)",
       v1::HeartbeatRequest::descriptor(), v1::HeartbeatResponse::descriptor(),
       JsonNames::kSnakeCase, {},
       [stub](const httplib::Request& r, const std::vector<std::string>& p) {
         v1::HeartbeatRequest req;
         absl::Status s = r.body.empty() ? absl::OkStatus() : ParseBody(r, &req);
         req.set_ai_center_id(p[0]);
         return IfOk(s, [&] {
           return CallUnary(stub.get(), &S::ReportHeartbeat, req, JsonNames::kSnakeCase);
         });
       }});
  routes.push_back(
      {"POST", base + "/{ai_center_id}/adapterkey", "centers",
       "Issue the center a new adapter key, answered once; the previous key stays valid for a grace period "
       "(its adapter reads the key from --center_key_file and proves the center with it on every connection)",
       nullptr, v1::IssueAdapterKeyResponse::descriptor(), JsonNames::kSnakeCase, {},
       [stub](const httplib::Request&, const std::vector<std::string>& p) {
         v1::IssueAdapterKeyRequest req;
         req.set_ai_center_id(p[0]);
         return CallUnary(stub.get(), &S::IssueAdapterKey, req, JsonNames::kSnakeCase);
       }});
  return routes;
}

}  // namespace jc::gateway
