#include "services/identity/authenticator.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/auth/api_token.h"
#include "common/status_macros.h"

namespace jc::identity {
namespace {

auth::ProjectRole ParseRole(std::string text) {
  text = absl::AsciiStrToLower(text);
  if (text == "viewer") return auth::ProjectRole::kViewer;
  if (text == "member") return auth::ProjectRole::kMember;
  if (text == "owner") return auth::ProjectRole::kOwner;
  return auth::ProjectRole::kNone;
}

void Grant(auth::Principal& p, const std::string& project, auth::ProjectRole role) {
  if (project.empty() || role == auth::ProjectRole::kNone) return;
  auto& held = p.projects[project];
  held = std::max(held, role);
}

}  // namespace

IdentityAuthenticator::IdentityAuthenticator(IdentityStore* identities, AuthenticatorOptions options)
    : identities_(identities), options_(std::move(options)) {}

absl::StatusOr<auth::Principal> IdentityAuthenticator::Authenticate(absl::string_view authorization) const {
  if (!options_.enabled) {
    auth::Principal anonymous;
    anonymous.name = "anonymous";
    anonymous.auth_method = "none";
    anonymous.federation_admin = true;
    return anonymous;
  }
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "no credentials: send \"Authorization: Bearer <token>\" with an API token or an OIDC token");
  }
  absl::string_view token;
  if (authorization.size() > 7 && absl::EqualsIgnoreCase(authorization.substr(0, 7), "bearer ")) {
    token = absl::StripAsciiWhitespace(authorization.substr(7));
  }
  if (token.empty() || std::any_of(token.begin(), token.end(), [](char c) { return absl::ascii_isspace(c); })) {
    return absl::UnauthenticatedError("malformed Authorization header: expected \"Bearer <token>\"");
  }
  if (!options_.service_secret.empty() && auth::ConstantTimeEquals(token, options_.service_secret)) {
    auth::Principal service;
    service.name = "jointcloud";
    service.kind = auth::Principal::Kind::kService;
    service.auth_method = "service";
    return service;
  }
  if (auth::LooksLikeApiToken(token)) {
    if (identities_ == nullptr) {
      return absl::UnauthenticatedError("this process keeps no identities and cannot check API tokens");
    }
    return identities_->PrincipalOfToken(token);
  }
  if (auth::JwtVerifier::LooksLikeJwt(token)) return FromJwt(token);
  return absl::UnauthenticatedError("unrecognized bearer token: neither an API token (jc_...) nor a JWT");
}

absl::StatusOr<auth::Principal> IdentityAuthenticator::FromJwt(absl::string_view token) const {
  if (options_.oidc == nullptr) {
    return absl::UnauthenticatedError("OIDC tokens are not accepted here: no issuer is configured (--oidc_issuer)");
  }
  JC_ASSIGN_OR_RETURN(nlohmann::json claims, options_.oidc->Verify(token));
  const OidcClaimNames& names = options_.claims;
  auth::Principal p;
  if (!claims.contains(names.user) || !claims[names.user].is_string() || claims[names.user].get<std::string>().empty()) {
    return absl::UnauthenticatedError(absl::StrCat("JWT has no \"", names.user, "\" claim naming the user"));
  }
  p.name = claims[names.user].get<std::string>();
  // "oidc:<name>" is how an identity named like a stored user is told apart (below): an
  // identity whose own claim says "oidc:bob" would be that renamed "bob".
  if (p.name.find(':') != std::string::npos) {
    return absl::UnauthenticatedError(absl::StrCat("the JWT's \"", names.user, "\" claim \"", p.name,
                                                   "\" is not a user name Jointcloud takes (no ':')"));
  }
  p.auth_method = "oidc";
  if (claims.contains(names.projects)) {
    const auto& projects = claims[names.projects];
    if (projects.is_array()) {
      for (const auto& item : projects) {
        if (!item.is_string()) continue;
        std::string text = item.get<std::string>();
        auto colon = text.rfind(':');
        if (colon == std::string::npos) Grant(p, text, auth::ProjectRole::kMember);
        else Grant(p, text.substr(0, colon), ParseRole(text.substr(colon + 1)));
      }
    } else if (projects.is_object()) {
      for (const auto& [project, role] : projects.items()) {
        if (role.is_string()) Grant(p, project, ParseRole(role.get<std::string>()));
      }
    }
  }
  if (claims.contains(names.roles) && claims[names.roles].is_array()) {
    for (const auto& role : claims[names.roles]) {
      if (role.is_string() && role.get<std::string>() == names.admin_role) p.federation_admin = true;
    }
  }
  // A stored user of the same name that admins linked to OIDC (accepts_oidc) adds what they
  // granted it here; any other stored user of that name lends nothing.
  if (identities_ != nullptr) {
    bool taken = false;
    JC_ASSIGN_OR_RETURN(std::optional<auth::Principal> stored, identities_->PrincipalOfOidcUser(p.name, &taken));
    // A stored user has the name and did not link it: the provider's identity is someone
    // else, and everything kept by name (jobs' users, idempotency keys, rate limits, the
    // account a center runs a user as) must not take it for that user.
    if (taken) p.name = absl::StrCat("oidc:", p.name);
    if (stored.has_value()) {
      p.stored_user = true;  // the admins linked this stored user to the provider's identity
      p.federation_admin = p.federation_admin || stored->federation_admin;
      for (const auto& [project, role] : stored->projects) Grant(p, project, role);
      p.operator_of = stored->operator_of;
    }
  }
  return p;
}

}  // namespace jc::identity
