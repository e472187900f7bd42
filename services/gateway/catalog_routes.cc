#include "jointcloud/v1/catalog.grpc.pb.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {

namespace v1 = ::jointcloud::v1;

namespace {

std::vector<QueryParam> PageParams() {
  return {{"page_size", "integer", "items per page (default 100, at most 1000)"},
          {"page_token", "string", "next_page_token of the previous page"}};
}

}  // namespace

std::vector<Route> CatalogRoutes(std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<v1::CatalogService::Stub> stub = v1::CatalogService::NewStub(channel);
  using S = v1::CatalogService::Stub;
  constexpr auto kNames = JsonNames::kSnakeCase;
  const auto* spec = v1::ResourceSpec::descriptor();
  const auto* image = v1::Image::descriptor();
  const std::string specs = "/openapi/v1/resourcespecs";
  const std::string images = "/openapi/v1/images";
  std::vector<Route> routes;

  // Resource specs (Table 3).
  routes.push_back({"POST", specs, "resource specs", "Create a resource spec (Table 3)", spec, spec,
                    kNames, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::CreateResourceSpecRequest req;
                      return IfOk(ParseBody(r, req.mutable_spec()), [&] {
                        return CallUnary(stub.get(), &S::CreateResourceSpec, req, kNames);
                      });
                    }});
  auto spec_query = PageParams();
  spec_query.push_back({"ai_center_id", "string", "only specs this center offers"});
  spec_query.push_back({"service_type", "string", "interactive, batch or streaming"});
  routes.push_back({"GET", specs, "resource specs", "List resource specs", nullptr,
                    v1::ListResourceSpecsResponse::descriptor(), kNames, spec_query,
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ListResourceSpecsRequest req;
                                            req.set_ai_center_id(QueryString(r, "ai_center_id"));
                      req.set_service_type(QueryString(r, "service_type"));
                      return IfOk(ReadPaging(r, &req), [&] {
                        return CallUnary(stub.get(), &S::ListResourceSpecs, req, kNames);
                      });
                    }});
  routes.push_back({"GET", specs + "/{resource_spec_id}", "resource specs", "Get a resource spec",
                    nullptr, spec, kNames, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::GetResourceSpecRequest req;
                      req.set_resource_spec_id(p[0]);
                      return CallUnary(stub.get(), &S::GetResourceSpec, req, kNames);
                    }});
  auto update_spec = [stub](bool partial) {
    return [stub, partial](const httplib::Request& r, const std::vector<std::string>& p) {
      v1::UpdateResourceSpecRequest req;
      absl::Status s = ParseBody(r, req.mutable_spec(), partial ? req.mutable_update_mask() : nullptr);
      if (s.ok() && !req.spec().resource_spec_id().empty() && req.spec().resource_spec_id() != p[0]) {
        s = absl::InvalidArgumentError("resource_spec_id in the body differs from the one in the path");
      }
      req.mutable_spec()->set_resource_spec_id(p[0]);
      return IfOk(s, [&] { return CallUnary(stub.get(), &S::UpdateResourceSpec, req, kNames); });
    };
  };
  routes.push_back({"PATCH", specs + "/{resource_spec_id}", "resource specs",
                    "Change the fields the body names", spec, spec, kNames, {}, update_spec(true)});
  routes.push_back({"PUT", specs + "/{resource_spec_id}", "resource specs",
                    "Replace every updatable field", spec, spec, kNames, {}, update_spec(false)});
  routes.push_back({"DELETE", specs + "/{resource_spec_id}", "resource specs",
                    "Delete a resource spec", nullptr, nullptr, kNames, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::DeleteResourceSpecRequest req;
                      req.set_resource_spec_id(p[0]);
                      return CallUnary(stub.get(), &S::DeleteResourceSpec, req, kNames, false);
                    }});
  routes.push_back({"GET", specs + "/{resource_spec_id}/centers", "resource specs",
                    "The spec x center map for one spec: can each center run it, its price there",
                    nullptr, v1::ListSpecCenterOffersResponse::descriptor(), kNames, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::ListSpecCenterOffersRequest req;
                      req.set_resource_spec_id(p[0]);
                      return CallUnary(stub.get(), &S::ListSpecCenterOffers, req, kNames);
                    }});
  routes.push_back({"GET", "/openapi/v1/centers/{ai_center_id}/resourcespecs", "resource specs",
                    "The spec x center map for one center", nullptr,
                    v1::ListSpecCenterOffersResponse::descriptor(), kNames, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::ListSpecCenterOffersRequest req;
                      req.set_ai_center_id(p[0]);
                      return CallUnary(stub.get(), &S::ListSpecCenterOffers, req, kNames);
                    }});
  routes.push_back({"PUT", specs + "/{resource_spec_id}/centers/{ai_center_id}/price",
                    "resource specs", "Set the spec's price at one center from now, or from effective_from (body {\"price\": n, "
                    "\"effective_from\": \"2026-12-01T00:00:00Z\"}); an attempt is billed at the price in force "
                    "when it started",
                    v1::SetSpecCenterPriceRequest::descriptor(), v1::SpecCenterOffer::descriptor(),
                    kNames, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::SetSpecCenterPriceRequest req;
                      absl::Status s = ParseBody(r, &req);
                      req.set_resource_spec_id(p[0]);
                      req.set_ai_center_id(p[1]);
                      return IfOk(s, [&] {
                        return CallUnary(stub.get(), &S::SetSpecCenterPrice, req, kNames);
                      });
                    }});

  // Images (Table 5).
  routes.push_back({"POST", images, "images", "Register an image (Table 5)", image, image, kNames, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::CreateImageRequest req;
                      return IfOk(ParseBody(r, req.mutable_image()), [&] {
                        return CallUnary(stub.get(), &S::CreateImage, req, kNames);
                      });
                    }});
  auto image_query = PageParams();
  image_query.push_back({"ai_center_id", "string", "only images at this center"});
  image_query.push_back({"framework", "string", "only images supporting this framework"});
  image_query.push_back({"project", "string", "only this project's images (\"-\": only the federation's)"});
  routes.push_back({"GET", images, "images", "List images", nullptr,
                    v1::ListImagesResponse::descriptor(), kNames, image_query,
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ListImagesRequest req;
                                            req.set_ai_center_id(QueryString(r, "ai_center_id"));
                      req.set_framework(QueryString(r, "framework"));
                      req.set_project(QueryString(r, "project"));
                      return IfOk(ReadPaging(r, &req), [&] {
                        return CallUnary(stub.get(), &S::ListImages, req, kNames);
                      });
                    }});
  // Image ids are unique within a project: ?project= says whose ("-": the federation's).
  std::vector<QueryParam> whose = {
      {"project", "string",
       "whose image (\"-\": the federation's); left out, the caller's project's, else the federation's"}};
  routes.push_back({"GET", images + "/{image_id}", "images", "Get an image", nullptr, image, kNames,
                    whose,
                    [stub](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::GetImageRequest req;
                      req.set_image_id(p[0]);
                      req.set_project(QueryString(r, "project"));
                      return CallUnary(stub.get(), &S::GetImage, req, kNames);
                    }});
  auto update_image = [stub](bool partial) {
    return [stub, partial](const httplib::Request& r, const std::vector<std::string>& p) {
      v1::UpdateImageRequest req;
      absl::Status s = ParseBody(r, req.mutable_image(), partial ? req.mutable_update_mask() : nullptr);
      if (s.ok() && !req.image().image_id().empty() && req.image().image_id() != p[0]) {
        s = absl::InvalidArgumentError("image_id in the body differs from the one in the path");
      }
      req.mutable_image()->set_image_id(p[0]);
      if (std::string project = QueryString(r, "project"); s.ok() && !project.empty()) {
        if (!req.image().project().empty() && req.image().project() != project) {
          s = absl::InvalidArgumentError("project in the body differs from the one in the query");
        }
        req.mutable_image()->set_project(project);
      }
      return IfOk(s, [&] { return CallUnary(stub.get(), &S::UpdateImage, req, kNames); });
    };
  };
  routes.push_back({"PATCH", images + "/{image_id}", "images", "Change the fields the body names",
                    image, image, kNames, whose, update_image(true)});
  routes.push_back({"PUT", images + "/{image_id}", "images", "Replace every updatable field", image,
                    image, kNames, whose, update_image(false)});
  routes.push_back({"DELETE", images + "/{image_id}", "images", "Delete an image", nullptr, nullptr,
                    kNames, whose,
                    [stub](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::DeleteImageRequest req;
                      req.set_image_id(p[0]);
                      req.set_project(QueryString(r, "project"));
                      return CallUnary(stub.get(), &S::DeleteImage, req, kNames, false);
                    }});
  return routes;
}

}  // namespace jc::gateway
