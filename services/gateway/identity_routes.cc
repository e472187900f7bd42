// Identities (SPEC C6): users, projects and their members, API tokens, and who am I.
#include <google/protobuf/empty.pb.h>

#include "jointcloud/v1/identity.grpc.pb.h"
#include "services/gateway/rest_call.h"
#include "services/gateway/routes.h"

namespace jc::gateway {

namespace v1 = ::jointcloud::v1;

MetricsReader AdminMetricsReader(std::shared_ptr<grpc::Channel> identity) {
  std::shared_ptr<v1::IdentityService::Stub> stub = v1::IdentityService::NewStub(identity);
  return [stub](const std::string& authorization, const std::string& address) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!IsForwardableHeaderValue(authorization)) return false;  // proves no one (and gRPC would abort)
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    ctx.AddMetadata("x-forwarded-for", address);
    ctx.AddMetadata(auth::kViaRestMetadata, "1");
    v1::Caller caller;
    if (!stub->WhoAmI(&ctx, google::protobuf::Empty(), &caller).ok()) return false;
    return caller.federation_admin() || caller.kind() == "service" || caller.auth_method() == "none";
  };
}

std::vector<Route> IdentityRoutes(std::shared_ptr<grpc::Channel> channel) {
  std::shared_ptr<v1::IdentityService::Stub> stub = v1::IdentityService::NewStub(channel);
  using S = v1::IdentityService::Stub;
  constexpr auto kSnake = JsonNames::kSnakeCase;
  const std::string base = "/openapi/v1";
  const std::vector<QueryParam> paging = {{"page_size", "integer", "items per page (default 100, at most 1000)"},
                                          {"page_token", "string", "next_page_token of the previous page"}};
  std::vector<Route> routes;

  routes.push_back({"GET", base + "/whoami", "identity", "Who the server takes the caller for, with roles", nullptr,
                    v1::Caller::descriptor(), kSnake, {},
                    [stub](const httplib::Request&, const std::vector<std::string>&) {
                      return CallUnary(stub.get(), &S::WhoAmI, google::protobuf::Empty(), kSnake);
                    }});

  routes.push_back({"POST", base + "/users", "identity", "Create a user (admins)", v1::User::descriptor(),
                    v1::User::descriptor(), kSnake, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::CreateUserRequest req;
                      return IfOk(ParseBody(r, req.mutable_user()),
                                  [&] { return CallUnary(stub.get(), &S::CreateUser, req, kSnake); });
                    }});
  routes.push_back({"GET", base + "/users", "identity", "List users, paged (admins)", nullptr,
                    v1::ListUsersResponse::descriptor(), kSnake, paging,
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ListUsersRequest req;
                      return IfOk(ReadPaging(r, &req),
                                  [&] { return CallUnary(stub.get(), &S::ListUsers, req, kSnake); });
                    }});
  routes.push_back({"GET", base + "/users/{name}", "identity", "A user with its memberships (admins)", nullptr,
                    v1::User::descriptor(), kSnake, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::GetUserRequest req;
                      req.set_name(p[0]);
                      return CallUnary(stub.get(), &S::GetUser, req, kSnake);
                    }});
  routes.push_back({"DELETE", base + "/users/{name}", "identity", "Delete a user and its tokens (admins)", nullptr,
                    nullptr, kSnake, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::DeleteUserRequest req;
                      req.set_name(p[0]);
                      return CallUnary(stub.get(), &S::DeleteUser, req, kSnake, false);
                    }});
  routes.push_back({"PUT", base + "/users/{name}/projects/{project}", "identity",
                    "Give a user a role in a project: body {\"role\": \"VIEWER\" | \"MEMBER\" | \"OWNER\"} (admins, or the "
                    "project's owners)",
                    v1::Membership::descriptor(), v1::User::descriptor(), kSnake, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::Membership body;
                      absl::Status s = ParseBody(r, &body);
                      v1::SetMembershipRequest req;
                      req.set_user_name(p[0]);
                      req.set_project(p[1]);
                      req.set_role(body.role());
                      if (s.ok() && body.role() == v1::PROJECT_ROLE_UNSPECIFIED) {
                        s = absl::InvalidArgumentError("role is required: VIEWER, MEMBER or OWNER");
                      }
                      return IfOk(s, [&] { return CallUnary(stub.get(), &S::SetMembership, req, kSnake); });
                    }});
  routes.push_back({"DELETE", base + "/users/{name}/projects/{project}", "identity",
                    "Take a user out of a project (admins, or the project's owners)", nullptr, v1::User::descriptor(),
                    kSnake, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::SetMembershipRequest req;
                      req.set_user_name(p[0]);
                      req.set_project(p[1]);
                      return CallUnary(stub.get(), &S::SetMembership, req, kSnake);
                    }});

  routes.push_back({"POST", base + "/projects", "identity", "Create a project (admins)", v1::Project::descriptor(),
                    v1::Project::descriptor(), kSnake, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::CreateProjectRequest req;
                      return IfOk(ParseBody(r, req.mutable_project()),
                                  [&] { return CallUnary(stub.get(), &S::CreateProject, req, kSnake); });
                    }});
  routes.push_back({"GET", base + "/projects", "identity", "List projects, paged (admins)", nullptr,
                    v1::ListProjectsResponse::descriptor(), kSnake, paging,
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ListProjectsRequest req;
                      return IfOk(ReadPaging(r, &req),
                                  [&] { return CallUnary(stub.get(), &S::ListProjects, req, kSnake); });
                    }});
  routes.push_back({"GET", base + "/projects/{name}", "identity", "A project (admins)", nullptr,
                    v1::Project::descriptor(), kSnake, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::GetProjectRequest req;
                      req.set_name(p[0]);
                      return CallUnary(stub.get(), &S::GetProject, req, kSnake);
                    }});
  routes.push_back({"DELETE", base + "/projects/{name}", "identity", "Delete a project with no members (admins)",
                    nullptr, nullptr, kSnake, {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::DeleteProjectRequest req;
                      req.set_name(p[0]);
                      return CallUnary(stub.get(), &S::DeleteProject, req, kSnake, false);
                    }});

  routes.push_back({"PUT", base + "/projects/{name}/quota", "identity",
                    "Set a project's quota: body {max_running_gpus, max_running_cpus, max_queued_jobs, max_priority}, "
                    "0 = no limit (max_priority: none above 0); replaces the whole quota, a field left out is 0 "
                    "(admins)",
                    v1::ProjectQuota::descriptor(), v1::Project::descriptor(), kSnake, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::SetProjectQuotaRequest req;
                      req.set_name(p[0]);
                      return IfOk(ParseBody(r, req.mutable_quota()),
                                  [&] { return CallUnary(stub.get(), &S::SetProjectQuota, req, kSnake); });
                    }});

  routes.push_back({"PUT", base + "/projects/{name}/budget", "identity",
                    "Set a project's monthly budget: body {monthly, hard, stop_running}, monthly 0 = none (admins)",
                    v1::ProjectBudget::descriptor(), v1::Project::descriptor(), kSnake, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>& p) {
                      v1::SetProjectBudgetRequest req;
                      req.set_name(p[0]);
                      return IfOk(ParseBody(r, req.mutable_budget()),
                                  [&] { return CallUnary(stub.get(), &S::SetProjectBudget, req, kSnake); });
                    }});

  routes.push_back({"POST", base + "/tokens", "identity",
                    "Create an API token for a user: body {user_name, description, ttl_seconds}; the answer's "
                    "secret is shown only this once (admins)",
                    v1::CreateTokenRequest::descriptor(), v1::CreateTokenResponse::descriptor(), kSnake, {},
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::CreateTokenRequest req;
                      return IfOk(ParseBody(r, &req), [&] { return CallUnary(stub.get(), &S::CreateToken, req, kSnake); });
                    }});
  std::vector<QueryParam> token_query = paging;
  token_query.push_back({"user_name", "string", "only this user's tokens"});
  routes.push_back({"GET", base + "/tokens", "identity", "List API tokens, never their secrets (admins)", nullptr,
                    v1::ListTokensResponse::descriptor(), kSnake, token_query,
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ListTokensRequest req;
                      req.set_user_name(QueryString(r, "user_name"));
                      return IfOk(ReadPaging(r, &req), [&] { return CallUnary(stub.get(), &S::ListTokens, req, kSnake); });
                    }});
  routes.push_back({"POST", base + "/tokens/{token_id}/revoke", "identity",
                    "Revoke an API token: refused from then on (admins)", nullptr, v1::ApiToken::descriptor(), kSnake,
                    {},
                    [stub](const httplib::Request&, const std::vector<std::string>& p) {
                      v1::RevokeTokenRequest req;
                      req.set_token_id(p[0]);
                      return CallUnary(stub.get(), &S::RevokeToken, req, kSnake);
                    }});
  std::vector<QueryParam> audit_query = paging;
  for (const char* field : {"actor", "action", "object", "outcome", "project"}) {
    audit_query.push_back({field, "string", std::string("only records with this ") + field});
  }
  routes.push_back({"GET", base + "/audit", "identity",
                    "The audit log, oldest first: every mutation and refused attempt, who, what, outcome, "
                    "request id, source (admins)",
                    nullptr, v1::ListAuditRecordsResponse::descriptor(), kSnake, audit_query,
                    [stub](const httplib::Request& r, const std::vector<std::string>&) {
                      v1::ListAuditRecordsRequest req;
                      req.set_actor(QueryString(r, "actor"));
                      req.set_action(QueryString(r, "action"));
                      req.set_object(QueryString(r, "object"));
                      req.set_outcome(QueryString(r, "outcome"));
                      req.set_project(QueryString(r, "project"));
                      return IfOk(ReadPaging(r, &req),
                                  [&] { return CallUnary(stub.get(), &S::ListAuditRecords, req, kSnake); });
                    }});
  return routes;
}

}  // namespace jc::gateway
