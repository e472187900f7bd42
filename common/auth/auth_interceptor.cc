#include "common/auth/auth_interceptor.h"

#include <google/protobuf/message.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/audit/describe_object.h"
#include "common/rest_envelope.h"

namespace jc::auth {
namespace {

// What a caller that proved no one claimed to be, for the audit: "(no credential)",
// "(unproven) token <id>" (an API token's id is not secret), "(unproven) JWT", or
// "(unproven) <scheme>". Never the secret itself.
std::string ClaimedIdentity(const std::string& authorization) {
  if (authorization.empty()) return "(no credential)";
  absl::string_view value = authorization;
  if (absl::ConsumePrefix(&value, "Bearer ") || absl::ConsumePrefix(&value, "bearer ")) {
    if (absl::StartsWith(value, "jc_")) {
      absl::string_view id = value.substr(3, 16);
      bool clean = !id.empty();
      for (char c : id) clean = clean && (absl::ascii_isalnum(static_cast<unsigned char>(c)));
      return clean ? absl::StrCat("(unproven) token ", id) : "(unproven) malformed token";
    }
    if (std::count(value.begin(), value.end(), '.') == 2) return "(unproven) JWT";
    return "(unproven) bearer";
  }
  absl::string_view scheme = value.substr(0, std::min<size_t>(value.find(' '), 16));
  std::string safe;
  for (char c : scheme) safe.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) ? c : '?');
  return absl::StrCat("(unproven) ", safe);
}

using grpc::experimental::InterceptionHookPoints;

std::string Metadata(const std::multimap<grpc::string_ref, grpc::string_ref>* metadata, const char* key) {
  if (metadata == nullptr) return "";
  auto it = metadata->find(key);
  return it == metadata->end() ? "" : std::string(it->second.data(), it->second.size());
}

// Each live call's decision, by its server context. Sharded so that concurrent calls
// rarely share a lock.
class CallDecisions {
 public:
  static CallDecisions& Get() {
    static auto* decisions = new CallDecisions();
    return *decisions;
  }
  void Put(const grpc::ServerContextBase* ctx, CallDecision decision) {
    Shard& s = ShardOf(ctx);
    std::lock_guard<std::mutex> lock(s.mu);
    s.decisions.insert_or_assign(ctx, std::move(decision));
  }
  void Erase(const grpc::ServerContextBase* ctx) {
    Shard& s = ShardOf(ctx);
    std::lock_guard<std::mutex> lock(s.mu);
    s.decisions.erase(ctx);
  }
  CallDecision Find(const grpc::ServerContextBase* ctx) {
    Shard& s = ShardOf(ctx);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.decisions.find(ctx);
    if (it == s.decisions.end()) {
      return {absl::UnauthenticatedError("this server did not authenticate the call"), nullptr};
    }
    return it->second;
  }

 private:
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<const grpc::ServerContextBase*, CallDecision> decisions;
  };
  Shard& ShardOf(const grpc::ServerContextBase* ctx) {
    return shards_[std::hash<const void*>()(ctx) % shards_.size()];
  }
  std::array<Shard, 16> shards_;
};

class AuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  AuthInterceptor(grpc::experimental::ServerRpcInfo* info, const Authenticator* authenticator,
                  const MethodAccess* access, RateLimiter* limiter, audit::AuditLog* audit,
                  bool service_needs_certificate)
      : context_(info->server_context()),
        method_(info->method() != nullptr ? info->method() : ""),
        authenticator_(authenticator),
        access_(access),
        limiter_(limiter),
        audit_log_(audit),
        service_needs_certificate_(service_needs_certificate) {}
  ~AuthInterceptor() override { CallDecisions::Get().Erase(context_); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const auto* metadata = methods->GetRecvInitialMetadata();
      CallDecision decision;
      decision.caller = Decide(Metadata(metadata, "authorization"), !Metadata(metadata, "x-forwarded-for").empty());
      auto rule = access_->find(method_);
      bool by_service = decision.caller.ok() && (*decision.caller)->kind == Principal::Kind::kService;
      if (audit_log_ != nullptr && rule != access_->end() && rule->second.audited && !by_service) {
        audit_ = audit_log_->Begin();
        Describe(metadata, decision.caller);
        decision.audit = audit_;
      }
      CallDecisions::Get().Put(context_, std::move(decision));
    }
    if (audit_ != nullptr && methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // The request is a generated protobuf message (Message is its only base).
      if (const void* message = methods->GetRecvMessage(); message != nullptr) {
        audit_->record.set_object(audit::DescribeObject(*static_cast<const google::protobuf::Message*>(message)));
      }
    }
    if (audit_ != nullptr && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Conclude(methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  // `via_rest`: the call came through the REST gateway (it forwards its client's address).
  absl::StatusOr<std::shared_ptr<const Principal>> Decide(const std::string& authorization, bool via_rest) const {
    auto level = access_->find(method_);
    if (level == access_->end()) {
      return absl::PermissionDeniedError(absl::StrCat("method ", method_, " is not open to callers"));
    }
    if (level->second.access == Access::kPublic) {
      auto principal = std::make_shared<Principal>();
      principal->name = "anonymous";
      principal->auth_method = "none";
      return std::shared_ptr<const Principal>(std::move(principal));
    }
    auto principal = authenticator_->Authenticate(authorization);
    if (!principal.ok()) return principal.status();
    if (principal->kind == Principal::Kind::kService && service_needs_certificate_ && FromOwnProcess() && via_rest) {
      // REST is for people and platforms: a client of the gateway presents no certificate
      // the CA signed, so the secret coming that way is someone who holds a copy of it.
      return absl::UnauthenticatedError(
          "the service secret is not accepted over REST: it is for Jointcloud's own processes, over mutual TLS");
    }
    if (principal->kind == Principal::Kind::kService && service_needs_certificate_ && !FromOwnProcess() &&
        !context_->auth_context()->IsPeerAuthenticated()) {
      // The secret is as powerful as an admin: with TLS on, it counts only from a peer that
      // proved itself with a certificate of the CA (Jointcloud's processes do).
      return absl::UnauthenticatedError(absl::StrCat(
          "the service secret is accepted only over mutual TLS, from a client certificate the CA signed (peer ",
          context_->peer(), ")"));
    }
    if (level->second.access == Access::kAdmin && !principal->IsAdmin()) {
      return absl::PermissionDeniedError(
          absl::StrCat(method_, " needs a federation admin; ", principal->name, " is not one"));
    }
    if (limiter_ != nullptr && !principal->IsAdmin()) {
      if (absl::Status admitted = limiter_->Admit(principal->name); !admitted.ok()) return admitted;
    }
    return std::shared_ptr<const Principal>(std::make_shared<Principal>(std::move(*principal)));
  }

  void Describe(const std::multimap<grpc::string_ref, grpc::string_ref>* metadata,
                const absl::StatusOr<std::shared_ptr<const Principal>>& caller) {
    auto& r = audit_->record;
    absl::string_view method = method_;
    if (absl::StartsWith(method, "/jointcloud.v1.")) method.remove_prefix(std::strlen("/jointcloud.v1."));
    std::string action(method);
    std::replace(action.begin(), action.end(), '/', '.');
    r.set_action(action);
    if (caller.ok()) {
      r.set_actor((*caller)->name);
      r.set_auth_method((*caller)->auth_method);
    } else {
      // Proved no one: the record says who it claimed to be, never empty.
      r.set_actor(ClaimedIdentity(Metadata(metadata, "authorization")));
      r.set_auth_method("none");
    }
    r.set_request_id(Metadata(metadata, "x-request-id"));
    // The gateway forwards its client's address over the in-process channel; a caller
    // over TCP is where its connection comes from.
    std::string peer = context_->peer();
    std::string forwarded = Metadata(metadata, "x-forwarded-for");
    r.set_source(absl::StartsWith(peer, "ipv") || forwarded.empty() ? peer : forwarded);
  }

  // After the handler: a call whose change committed has its row; any other gets one now.
  void Conclude(const grpc::Status& status) {
    if (audit_->rider.committed) return;
    auto& r = audit_->record;
    r.set_outcome(StatusCodeName(static_cast<absl::StatusCode>(status.error_code())));
    r.set_message(status.error_message());
    if (absl::Status written = audit_log_->WriteAlone(r); !written.ok()) {
      spdlog::error("audit: the record of {} by {} ({}) was not written: {}", r.action(), r.actor(), r.outcome(),
                    written.ToString());
    }
  }

  const grpc::ServerContextBase* context_;
  std::string method_;
  const Authenticator* authenticator_;
  const MethodAccess* access_;
  // In-process channels (services of one process calling each other) have no transport
  // security at all, where a network peer has "ssl" (or "insecure" on a plaintext port).
  bool FromOwnProcess() const {
    return context_->auth_context()->FindPropertyValues("transport_security_type").empty();
  }

  RateLimiter* limiter_;
  audit::AuditLog* audit_log_;
  bool service_needs_certificate_;
  std::shared_ptr<audit::CallAudit> audit_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  Factory(std::shared_ptr<const Authenticator> authenticator, std::shared_ptr<const MethodAccess> access,
          std::shared_ptr<RateLimiter> limiter, std::shared_ptr<audit::AuditLog> audit, bool service_needs_certificate)
      : authenticator_(std::move(authenticator)),
        access_(std::move(access)),
        limiter_(std::move(limiter)),
        audit_(std::move(audit)),
        service_needs_certificate_(service_needs_certificate) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new AuthInterceptor(info, authenticator_.get(), access_.get(), limiter_.get(), audit_.get(),
                               service_needs_certificate_);
  }

 private:
  std::shared_ptr<const Authenticator> authenticator_;
  std::shared_ptr<const MethodAccess> access_;
  std::shared_ptr<RateLimiter> limiter_;
  std::shared_ptr<audit::AuditLog> audit_;
  bool service_needs_certificate_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAuthInterceptor(
    std::shared_ptr<const Authenticator> authenticator, std::shared_ptr<const MethodAccess> access,
    std::shared_ptr<RateLimiter> limiter, std::shared_ptr<audit::AuditLog> audit, bool service_needs_certificate) {
  return std::make_unique<Factory>(std::move(authenticator), std::move(access), std::move(limiter), std::move(audit),
                                   service_needs_certificate);
}

CallDecision DecisionOf(const grpc::ServerContextBase* context) { return CallDecisions::Get().Find(context); }

}  // namespace jc::auth
