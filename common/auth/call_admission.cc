#include "common/auth/call_admission.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/audit/describe_object.h"
#include "common/proto_field_plan.h"
#include "common/proto_path.h"
#include "common/rest_envelope.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace jc::auth {
namespace {

// What a caller that proved no one claimed to be, for the audit: "(no credential)",
// "(unproven) token <id>" (an API token's id is not secret), "(unproven) JWT", or
// "(unproven) <scheme>". Never the secret itself.
std::string ClaimedIdentity(absl::string_view authorization) {
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

// In-process channels (services of one process calling each other) have no transport
// security at all, where a network peer has "ssl" (or "insecure" on a plaintext port); a
// direct call has no connection.
bool FromOwnProcess(const CallFacts& facts) {
  return facts.connection == nullptr ||
         facts.connection->auth_context()->FindPropertyValues("transport_security_type").empty();
}

// What the walk looks for: string fields (its plan adds the message fields, maps' entries
// included, that can lead to one).
bool IsStringField(const google::protobuf::FieldDescriptor* f) {
  return f->type() == google::protobuf::FieldDescriptor::TYPE_STRING;
}

absl::Status StringsAreUtf8(const google::protobuf::Message& m, ProtoPath& path) {
  using FD = google::protobuf::FieldDescriptor;
  static ProtoFieldPlans* const plans = new ProtoFieldPlans(&IsStringField, /*through_maps=*/true);
  const google::protobuf::Reflection* r = m.GetReflection();
  for (const FD* f : plans->Of(m.GetDescriptor())) {
    // Set or not, as reflection lists fields: an unset singular field holds nothing to check.
    const int n = f->is_repeated() ? r->FieldSize(m, f) : r->HasField(m, f) ? 1 : 0;
    if (n == 0) continue;
    if (f->type() == FD::TYPE_STRING) {
      for (int i = 0; i < n; ++i) {
        std::string scratch;
        const std::string& v =
            f->is_repeated() ? r->GetRepeatedStringReference(m, f, i, &scratch) : r->GetStringReference(m, f, &scratch);
        if (!IsUtf8(v)) {
          path.Push(f);
          return absl::InvalidArgumentError(
              absl::StrCat(path.Render(ProtoPath::Names::kProto, /*indices=*/false), ": not UTF-8 text"));
        }
      }
      continue;
    }
    path.Push(f);
    for (int i = 0; i < n; ++i) {
      const auto& sub = f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f);
      JC_RETURN_IF_ERROR(StringsAreUtf8(sub, path));
    }
    path.Pop();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckStringsAreUtf8(const google::protobuf::Message& message) {
  ProtoPath path;
  return StringsAreUtf8(message, path);
}

CallAdmission::CallAdmission(std::shared_ptr<const Authenticator> authenticator,
                             std::shared_ptr<const MethodAccess> access, std::shared_ptr<RateLimiter> limiter,
                             std::shared_ptr<audit::AuditLog> audit, bool service_needs_certificate)
    : authenticator_(std::move(authenticator)),
      access_(std::move(access)),
      limiter_(std::move(limiter)),
      audit_(std::move(audit)),
      service_needs_certificate_(service_needs_certificate) {}

CallDecision CallAdmission::Decide(const CallFacts& facts) const {
  CallDecision decision;
  std::optional<Principal> proven;
  decision.caller = Caller(facts, &proven);
  auto rule = access_->find(facts.method);
  bool by_service = decision.caller.ok() && (*decision.caller)->kind == Principal::Kind::kService;
  if (audit_ != nullptr && rule != access_->end() && rule->second.audited && !by_service) {
    decision.audit = audit_->Begin();
    Describe(facts, decision, proven);
  }
  return decision;
}

absl::StatusOr<std::shared_ptr<const Principal>> CallAdmission::Caller(const CallFacts& facts,
                                                                      std::optional<Principal>* proven) const {
  auto level = access_->find(facts.method);
  if (level == access_->end()) {
    return absl::PermissionDeniedError(absl::StrCat("method ", facts.method, " is not open to callers"));
  }
  if (level->second.access == Access::kPublic) {
    auto principal = std::make_shared<Principal>();
    principal->name = "anonymous";
    principal->auth_method = "none";
    return std::shared_ptr<const Principal>(std::move(principal));
  }
  auto principal = authenticator_->Authenticate(facts.authorization);
  if (!principal.ok()) return principal.status();
  *proven = *principal;
  if (principal->kind == Principal::Kind::kService && service_needs_certificate_) {
    bool own_process = FromOwnProcess(facts);
    if (own_process && facts.via_rest) {
      // REST is for people and platforms: a client of the gateway presents no certificate
      // the CA signed, so the secret coming that way is someone who holds a copy of it.
      return absl::UnauthenticatedError(
          "the service secret is not accepted over REST: it is for Jointcloud's own processes, over mutual TLS");
    }
    if (!own_process && !facts.connection->auth_context()->IsPeerAuthenticated()) {
      // The secret is as powerful as an admin: with TLS on, it counts only from a peer that
      // proved itself with a certificate of the CA (Jointcloud's processes do).
      return absl::UnauthenticatedError(absl::StrCat(
          "the service secret is accepted only over mutual TLS, from a client certificate the CA signed (peer ",
          facts.connection->peer(), ")"));
    }
  }
  if (level->second.access == Access::kAdmin && !principal->IsAdmin()) {
    // Said in words a REST caller reads too: the method ("/jointcloud.v1.IdentityService/
    // ListUsers") only in brackets, as "IdentityService.ListUsers".
    std::string method(facts.method);
    if (auto dot = method.rfind('.'); dot != std::string::npos) method = method.substr(dot + 1);
    std::replace(method.begin(), method.end(), '/', '.');
    return absl::PermissionDeniedError(absl::StrCat("only federation admins may do this (", method, "); ",
                                                    principal->name, " is not one"));
  }
  if (limiter_ != nullptr && !principal->IsAdmin()) {
    if (absl::Status admitted = limiter_->Admit(principal->name); !admitted.ok()) return admitted;
  }
  return std::shared_ptr<const Principal>(std::make_shared<Principal>(std::move(*principal)));
}

void CallAdmission::Describe(const CallFacts& facts, const CallDecision& decision,
                             const std::optional<Principal>& proven) const {
  auto& r = decision.audit->record;
  absl::string_view method = facts.method;
  if (absl::StartsWith(method, "/jointcloud.v1.")) method.remove_prefix(std::strlen("/jointcloud.v1."));
  std::string action(method);
  std::replace(action.begin(), action.end(), '/', '.');
  r.set_action(action);
  if (decision.caller.ok()) {
    r.set_actor((*decision.caller)->name);
    r.set_auth_method((*decision.caller)->auth_method);
  } else if (proven.has_value() && proven->kind == Principal::Kind::kUser) {
    // Proved who it is, and was refused for what it asked (its rate, an admin's method).
    r.set_actor(proven->name);
    r.set_auth_method(proven->auth_method);
  } else {
    // Proved no one (or a service secret from where it does not count): the record says
    // who it claimed to be, never empty.
    r.set_actor(ClaimedIdentity(facts.authorization));
    r.set_auth_method("none");
  }
  r.set_request_id(std::string(facts.request_id));
  // The gateway forwards its client's address (over the in-process channel or to a direct
  // call); a caller over TCP is where its connection comes from.
  std::string peer = facts.connection != nullptr ? facts.connection->peer() : "";
  if (absl::StartsWith(peer, "ipv") || (!facts.via_rest && facts.forwarded_for.empty())) {
    r.set_source(peer);
  } else {
    r.set_source(facts.forwarded_for.empty() ? "unknown (the REST client's address was gone)"
                                             : std::string(facts.forwarded_for));
  }
}

void CallAdmission::DescribeRequest(const CallDecision& decision, const google::protobuf::Message& request) {
  if (decision.audit != nullptr) decision.audit->record.set_object(audit::DescribeObject(request));
}

void CallAdmission::Conclude(const CallDecision& decision, const grpc::Status& status) const {
  if (decision.audit == nullptr || audit_ == nullptr || decision.audit->rider.committed) return;
  auto& r = decision.audit->record;
  r.set_outcome(StatusCodeName(static_cast<absl::StatusCode>(status.error_code())));
  r.set_message(status.error_message());
  if (absl::Status written = audit_->WriteAlone(r); !written.ok()) {
    spdlog::error("audit: the record of {} by {} ({}) was not written: {}", r.action(), r.actor(), r.outcome(),
                  written.ToString());
  }
}

}  // namespace jc::auth
