#include "services/identity/identity_service.h"

#include "absl/strings/str_cat.h"
#include "common/auth/auth_interceptor.h"
#include "common/grpc_status.h"
#include "jointcloud/v1/identity.grpc.pb.h"

namespace jc::identity {
namespace {

using grpc::ServerContext;
using grpc::Status;

// Every method but WhoAmI, GetProject (a project's members), memberships (a project's
// owners) and a user's own tokens is for federation admins (the access table says so, and
// each handler still takes its caller, so a call the interceptor did not admit does nothing).
class IdentityService final : public v1::IdentityService::Service {
 public:
  IdentityService(IdentityStore* s, audit::AuditLog* audit) : s_(s), audit_(audit) {}

  Status CreateUser(ServerContext* ctx, const v1::CreateUserRequest* req, v1::User* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Admin(caller, "creating a user", [&] { return s_->CreateUser(req->user()); }), resp);
  }
  Status GetUser(ServerContext* ctx, const v1::GetUserRequest* req, v1::User* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Admin(caller, "reading a user", [&] { return s_->GetUser(req->name()); }), resp);
  }
  Status ListUsers(ServerContext* ctx, const v1::ListUsersRequest* req, v1::ListUsersResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Admin(caller, "listing users", [&] { return s_->ListUsers(*req); }), resp);
  }
  Status DeleteUser(ServerContext* ctx, const v1::DeleteUserRequest* req, google::protobuf::Empty*) override {
    JC_GRPC_CALLER(caller, ctx);
    if (auto s = auth::NeedAdmin(caller, "deleting a user"); !s.ok()) return ToGrpcStatus(s);
    return ToGrpcStatus(s_->DeleteUser(req->name()));
  }
  Status SetMembership(ServerContext* ctx, const v1::SetMembershipRequest* req, v1::User* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    // Admins manage every project's members; a project's owners manage theirs (the user must
    // exist: creating users stays with admins).
    if (caller.RoleIn(req->project()) != auth::ProjectRole::kOwner) {
      return ToGrpcStatus(absl::PermissionDeniedError(
          absl::StrCat("only federation admins and the owners of project ", req->project(),
                       " manage its members; ", caller.name, " is not one")));
    }
    return Reply(s_->SetMembership(*req), resp);
  }
  Status CreateProject(ServerContext* ctx, const v1::CreateProjectRequest* req, v1::Project* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Admin(caller, "creating a project", [&] { return s_->CreateProject(req->project()); }), resp);
  }
  Status GetProject(ServerContext* ctx, const v1::GetProjectRequest* req, v1::Project* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    // Its members see it, its quota and budget with it (as `sshare` shows a Slurm account's
    // limits to its users); to anyone else the same answer whether it exists or not.
    if (!caller.HasRole(req->name(), auth::ProjectRole::kViewer)) {
      return ToGrpcStatus(absl::PermissionDeniedError(absl::StrCat(
          "only federation admins and the members of project ", req->name(), " read it; ", caller.name, " is not one")));
    }
    return Reply(s_->GetProject(req->name()), resp);
  }
  Status ListProjects(ServerContext* ctx, const v1::ListProjectsRequest* req, v1::ListProjectsResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Admin(caller, "listing projects", [&] { return s_->ListProjects(*req); }), resp);
  }
  Status DeleteProject(ServerContext* ctx, const v1::DeleteProjectRequest* req, google::protobuf::Empty*) override {
    JC_GRPC_CALLER(caller, ctx);
    if (auto s = auth::NeedAdmin(caller, "deleting a project"); !s.ok()) return ToGrpcStatus(s);
    return ToGrpcStatus(s_->DeleteProject(req->name()));
  }
  Status SetProjectBudget(ServerContext* ctx, const v1::SetProjectBudgetRequest* req, v1::Project* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Admin(caller, "setting a project's budget", [&] { return s_->SetProjectBudget(*req); }), resp);
  }
  Status SetProjectQuota(ServerContext* ctx, const v1::SetProjectQuotaRequest* req, v1::Project* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Admin(caller, "setting a project's quota", [&] { return s_->SetProjectQuota(*req); }), resp);
  }
  // Tokens: admins manage everyone's; a user creates, lists and revokes its own (as
  // personal access tokens go), never another's.
  Status CreateToken(ServerContext* ctx, const v1::CreateTokenRequest* req, v1::CreateTokenResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (auto s = NeedStoredUser(caller); !s.ok()) return ToGrpcStatus(s);
    if (OwnTokens(caller, req->user_name())) return Reply(s_->CreateToken(*req), resp);
    return Reply(Admin(caller, "creating a token for another user", [&] { return s_->CreateToken(*req); }), resp);
  }
  Status ListTokens(ServerContext* ctx, const v1::ListTokensRequest* req, v1::ListTokensResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (auto s = NeedStoredUser(caller); !s.ok()) return ToGrpcStatus(s);
    if (!caller.IsAdmin() && (req->user_name().empty() || OwnTokens(caller, req->user_name()))) {
      v1::ListTokensRequest own = *req;
      own.set_user_name(caller.name);  // a user's listing is of its own tokens
      if (OwnTokens(caller, own.user_name())) return Reply(s_->ListTokens(own), resp);
    }
    return Reply(Admin(caller, "listing other users' tokens", [&] { return s_->ListTokens(*req); }), resp);
  }
  Status RevokeToken(ServerContext* ctx, const v1::RevokeTokenRequest* req, v1::ApiToken* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    if (auto s = NeedStoredUser(caller); !s.ok()) return ToGrpcStatus(s);
    if (!caller.IsAdmin() && OwnTokens(caller, caller.name)) {
      // Its own token only: looked up among the caller's.
      v1::ListTokensRequest mine;
      mine.set_user_name(caller.name);
      mine.set_page_size(1000);
      auto listed = s_->ListTokens(mine);
      if (!listed.ok()) return ToGrpcStatus(listed.status());
      for (const auto& t : listed->tokens()) {
        if (t.token_id() == req->token_id()) return Reply(s_->RevokeToken(req->token_id()), resp);
      }
    }
    return Reply(Admin(caller, "revoking another user's token", [&] { return s_->RevokeToken(req->token_id()); }),
                 resp);
  }
  // Whether `user` names the calling user itself: the stored user its credential proves
  // (an API token of it, or an OIDC identity it accepts), not a service, not someone else,
  // and not an OIDC identity that only carries a stored user's name.
  static bool OwnTokens(const auth::Principal& caller, const std::string& user) {
    return caller.kind == auth::Principal::Kind::kUser && caller.stored_user && !caller.name.empty() &&
           user == caller.name;
  }
  // API tokens are a stored user's: a caller that is neither an admin nor the stored user its
  // credential proves (an OIDC identity no stored user accepts) has none, whatever its name.
  static absl::Status NeedStoredUser(const auth::Principal& caller) {
    if (caller.IsAdmin() || caller.stored_user) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(
        "API tokens belong to stored users; ", caller.name, " signed in through ", caller.auth_method,
        " and no stored user of that name accepts it (an admin links one with accepts_oidc)"));
  }
  Status WhoAmI(ServerContext* ctx, const google::protobuf::Empty*, v1::Caller* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    resp->set_name(caller.name);
    resp->set_kind(caller.kind == auth::Principal::Kind::kService ? "service" : "user");
    resp->set_auth_method(caller.auth_method);
    resp->set_federation_admin(caller.IsAdmin());
    for (const auto& [project, role] : caller.projects) {
      v1::Membership* m = resp->add_memberships();
      m->set_project(project);
      m->set_role(static_cast<v1::ProjectRole>(role));
    }
    for (const auto& center : caller.operator_of) resp->add_operator_of(center);
    resp->set_token_id(caller.token_id);
    return Status::OK;
  }

  Status ListAuditRecords(ServerContext* ctx, const v1::ListAuditRecordsRequest* req,
                          v1::ListAuditRecordsResponse* resp) override {
    JC_GRPC_CALLER(caller, ctx);
    return Reply(Admin(caller, "reading the audit log", [&] { return audit_->List(*req); }), resp);
  }

 private:
  template <typename Fn>
  static auto Admin(const auth::Principal& caller, const char* what, Fn&& fn) -> decltype(fn()) {
    if (auto s = auth::NeedAdmin(caller, what); !s.ok()) return s;
    return fn();
  }

  IdentityStore* s_;
  audit::AuditLog* audit_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeIdentityService(IdentityStore* identities, audit::AuditLog* audit) {
  return std::make_unique<IdentityService>(identities, audit);
}

}  // namespace jc::identity
