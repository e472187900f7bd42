#pragma once

// Offline verification of OIDC/JWT bearer tokens (RFC 7519) against a configured issuer,
// audience and JWKS file (RFC 7517), with OpenSSL's EVP API: no hand-written crypto.
//
// Only RS256 (RSA keys) and ES256 (EC P-256 keys) are taken, and a key verifies only its
// own algorithm: the token's `alg` is checked against that whitelist before anything is
// verified, so `alg: none` and the HMAC-with-a-public-key confusion are refused up front.

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace jc::auth {

struct JwtOptions {
  std::string issuer;    // `iss` must equal it
  std::string audience;  // `aud` must equal it or, as an array, contain it
  absl::Duration leeway = absl::Seconds(60);  // clock skew allowed on exp and nbf
};

class JwtVerifier {
 public:
  // `jwks` is a JWKS document: {"keys": [{"kty": "RSA", "kid", "n", "e"} or
  // {"kty": "EC", "crv": "P-256", "kid", "x", "y"}, ...]}.
  static absl::StatusOr<std::unique_ptr<JwtVerifier>> FromJwks(absl::string_view jwks, JwtOptions options,
                                                               const Clock* clock);
  static absl::StatusOr<std::unique_ptr<JwtVerifier>> FromJwksFile(const std::string& path, JwtOptions options,
                                                                    const Clock* clock);
  ~JwtVerifier();

  // The token's claims once its algorithm, signature, exp, nbf, iss and aud check out;
  // Unauthenticated saying which did not.
  absl::StatusOr<nlohmann::json> Verify(absl::string_view token) const;

  static bool LooksLikeJwt(absl::string_view token);

 private:
  struct Key;
  JwtVerifier(std::vector<std::unique_ptr<Key>> keys, JwtOptions options, const Clock* clock);
  const Key* KeyFor(const nlohmann::json& header, std::string* why) const;

  std::vector<std::unique_ptr<Key>> keys_;
  JwtOptions options_;
  const Clock* clock_;
};

}  // namespace jc::auth
