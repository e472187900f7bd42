#include "jointcloud/v1/datamon.grpc.pb.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {

namespace v1 = ::jointcloud::v1;

std::vector<Route> DatamonRoutes(std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<v1::DatamonService::Stub> stub = v1::DatamonService::NewStub(channel);
  using S = v1::DatamonService::Stub;
  constexpr auto kNames = JsonNames::kSnakeCase;
  const auto* dataset = v1::Dataset::descriptor();
  const std::string base = "/openapi/v1/datasets";
  const std::string one = base + "/{data_name}/{data_version}";
  // Names and versions are unique within a project: ?project= says whose ("-": the
  // federation's); left out, the caller's project's, else the federation's.
  auto key_of = [](const httplib::Request& r, const std::vector<std::string>& p) {
    v1::DatasetKey key;
    key.set_data_name(p[0]);
    key.set_data_version(p[1]);
    key.set_project(QueryString(r, "project"));
    return key;
  };
  const std::vector<QueryParam> whose = {
      {"project", "string",
       "whose dataset (\"-\": the federation's); left out, the caller's project's, else the federation's"}};
  std::vector<Route> routes;

  routes.push_back({"POST", base, "datasets", "Register a dataset and its locations (Table 6)",
                    dataset, dataset, kNames, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::CreateDatasetRequest req;
                      return IfOk(ParseBody(r, req.mutable_dataset()), [&] {
                        return CallUnary(stub.get(), &S::CreateDataset, req, kNames);
                      });
                    }});
  routes.push_back({"GET", base, "datasets", "List datasets", nullptr,
                    v1::ListDatasetsResponse::descriptor(), kNames,
                    {{"data_name", "string", "only versions of this dataset"},
                     {"ai_center_id", "string", "only datasets with a copy at this center"},
                     {"created_user", "string", "only datasets this user uploaded"},
                     {"project", "string", "only this project's datasets (\"-\": only the federation's)"},
                     {"page_size", "integer", "items per page (default 100, at most 1000)"},
                     {"page_token", "string", "next_page_token of the previous page"}},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ListDatasetsRequest req;
                                            req.set_data_name(QueryString(r, "data_name"));
                      req.set_ai_center_id(QueryString(r, "ai_center_id"));
                      req.set_created_user(QueryString(r, "created_user"));
                      req.set_project(QueryString(r, "project"));
                      return IfOk(ReadPaging(r, &req), [&] {
                        return CallUnary(stub.get(), &S::ListDatasets, req, kNames);
                      });
                    }});
  routes.push_back({"GET", one, "datasets", "Get one version of a dataset", nullptr, dataset,
                    kNames, whose,
                    [stub, key_of](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::GetDatasetRequest req;
                      *req.mutable_key() = key_of(r, p);
                      return CallUnary(stub.get(), &S::GetDataset, req, kNames);
                    }});
  auto update = [stub](bool partial) {
    return [stub, partial](const httplib::Request& r, const std::vector<std::string>& p) {
      v1::UpdateDatasetRequest req;
      absl::Status s =
          ParseBody(r, req.mutable_dataset(), partial ? req.mutable_update_mask() : nullptr);
      const auto& d = req.dataset();
      if (s.ok() && ((!d.data_name().empty() && d.data_name() != p[0]) ||
                     (!d.data_version().empty() && d.data_version() != p[1]))) {
        s = absl::InvalidArgumentError("data_name/data_version in the body differ from the path");
      }
      req.mutable_dataset()->set_data_name(p[0]);
      req.mutable_dataset()->set_data_version(p[1]);
      if (std::string project = QueryString(r, "project"); s.ok() && !project.empty()) {
        if (!req.dataset().project().empty() && req.dataset().project() != project) {
          s = absl::InvalidArgumentError("project in the body differs from the one in the query");
        }
        req.mutable_dataset()->set_project(project);
      }
      return IfOk(s, [&] { return CallUnary(stub.get(), &S::UpdateDataset, req, kNames); });
    };
  };
  routes.push_back({"PATCH", one, "datasets", "Change the fields the body names", dataset, dataset,
                    kNames, whose, update(true)});
  routes.push_back({"PUT", one, "datasets", "Replace every updatable field", dataset, dataset,
                    kNames, whose, update(false)});
  routes.push_back({"DELETE", one, "datasets", "Delete one version of a dataset", nullptr, nullptr,
                    kNames, whose,
                    [stub, key_of](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::DeleteDatasetRequest req;
                      *req.mutable_key() = key_of(r, p);
                      return CallUnary(stub.get(), &S::DeleteDataset, req, kNames, false);
                    }});
  routes.push_back(
      {"POST", one + "/migration-sources", "datasets",
       "Choose and rank the sources to copy the dataset from to a target center (6.3.2). "
       "Body: {\"target_center_id\": \"...\", \"weights\": {\"least_load\": 2}}",
       v1::SelectMigrationSourcesRequest::descriptor(),
       v1::SelectMigrationSourcesResponse::descriptor(), kNames, whose,
       [stub, key_of](const httplib::Request& r, const std::vector<std::string>& p) {
         v1::SelectMigrationSourcesRequest req;
         absl::Status s = ParseBody(r, &req);
         *req.mutable_key() = key_of(r, p);
         return IfOk(s, [&] { return CallUnary(stub.get(), &S::SelectMigrationSources, req, kNames); });
       }});
  return routes;
}

}  // namespace jc::gateway
