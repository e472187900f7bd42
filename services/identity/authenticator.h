#pragma once

// Who a bearer token proves (SPEC C6): the one Authenticator of the control plane's gRPC
// servers (REST reaches them through the gateway, which forwards the header).
//   - the service secret        -> Jointcloud's own services ("jointcloud", kind service)
//   - jc_<id>_<secret>          -> the API token's user, from the identity store
//   - a JWT (header.payload.sig) -> the OIDC user, verified offline (JwtVerifier); roles
//     from configured claims, joined with the stored user of the same name if there is one

#include <memory>
#include <string>

#include "common/auth/auth_interceptor.h"
#include "common/auth/jwt_verifier.h"
#include "services/identity/identity_store.h"

namespace jc::identity {

// How OIDC claims map to Jointcloud's roles.
struct OidcClaimNames {
  std::string user = "sub";           // the user's name
  std::string projects = "projects";  // ["proj:member", ...] or {"proj": "member", ...}
  std::string roles = "roles";        // an array; admin_role in it makes a federation admin
  std::string admin_role = "jointcloud-admin";
};

struct AuthenticatorOptions {
  // Off only by --insecure_no_auth: every call then runs as "anonymous", a federation admin.
  bool enabled = true;
  std::string service_secret;
  std::shared_ptr<const auth::JwtVerifier> oidc;  // null: OIDC tokens are refused
  OidcClaimNames claims;
};

class IdentityAuthenticator final : public auth::Authenticator {
 public:
  // `identities` may be null in a process without the store: API tokens are then refused.
  IdentityAuthenticator(IdentityStore* identities, AuthenticatorOptions options);
  absl::StatusOr<auth::Principal> Authenticate(absl::string_view authorization) const override;

 private:
  absl::StatusOr<auth::Principal> FromJwt(absl::string_view token) const;

  IdentityStore* identities_;
  AuthenticatorOptions options_;
};

}  // namespace jc::identity
