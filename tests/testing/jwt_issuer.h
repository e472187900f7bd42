#pragma once

// A test OIDC issuer: makes RSA (RS256) and EC P-256 (ES256) keys with OpenSSL, publishes
// them as a JWKS document, and signs tokens with whatever header and claims a test wants,
// including ones a verifier must refuse (alg none, HS256 keyed with the public key, a
// foreign key).

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace jc::testing {

class JwtIssuer {
 public:
  JwtIssuer();
  ~JwtIssuer();

  // {"keys": [the RSA key "rsa-1", the EC key "ec-1"]}.
  std::string Jwks() const;
  // A token signed with kid "rsa-1" (RS256) or "ec-1" (ES256).
  std::string Sign(const nlohmann::json& claims, const std::string& alg = "RS256") const;
  // A token whose header is `header` as given, signed as `sign_as` says: "RS256", "ES256",
  // "none" (empty signature), "HS256-public" (HMAC keyed with the RSA public key's PEM),
  // "foreign" (RS256 by a key not in the JWKS).
  std::string SignRaw(const nlohmann::json& header, const nlohmann::json& claims, const std::string& sign_as) const;

 private:
  struct Keys;
  std::unique_ptr<Keys> keys_;
};

}  // namespace jc::testing
