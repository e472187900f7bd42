// libFuzzer harness: the Authorization header of every REST request and gRPC call, as the
// authenticator reads it (scheme, API token shape, JWT header, payload and signature
// against a JWKS of the test issuer's keys). The input is the header's value; the first
// byte also selects whether it is sent as is or behind "Bearer ".
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/auth/api_token.h"
#include "common/auth/jwt_verifier.h"
#include "services/identity/authenticator.h"
#include "tests/testing/jwt_issuer.h"

namespace {

const jc::identity::IdentityAuthenticator& Authenticator() {
  static const auto* authenticator = [] {
    jc::auth::JwtOptions options;
    options.issuer = "https://idp.example.test";
    options.audience = "jointcloud";
    jc::testing::JwtIssuer issuer;
    auto verifier = jc::auth::JwtVerifier::FromJwks(issuer.Jwks(), options, jc::RealClock::Get());
    if (!verifier.ok()) __builtin_trap();
    jc::identity::AuthenticatorOptions ao;
    ao.service_secret = "fuzz-service-secret-of-at-least-32-characters";
    ao.oidc = std::move(verifier).value();
    // No identity store: API tokens are parsed, then refused.
    return new jc::identity::IdentityAuthenticator(nullptr, std::move(ao));
  }();
  return *authenticator;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string value(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string header = (data[0] & 1) ? "Bearer " + value : value;
  auto principal = Authenticator().Authenticate(header);
  // Nothing made up may authenticate: only the service secret does here.
  if (principal.ok() && principal->auth_method != "service") __builtin_trap();
  (void)jc::auth::ParseApiToken(value);
  return 0;
}
