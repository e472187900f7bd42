#include "common/auth/jwt_verifier.h"
#include "common/json_depth.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace jc::auth {
namespace {

constexpr size_t kMaxTokenBytes = 16 << 10;

struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
using Bn = std::unique_ptr<BIGNUM, BnFree>;

absl::StatusOr<std::string> B64Url(const nlohmann::json& key, const char* field) {
  auto it = key.find(field);
  if (it == key.end() || !it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("JWKS key lacks \"", field, "\""));
  }
  std::string out;
  if (!absl::WebSafeBase64Unescape(it->get<std::string>(), &out) || out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("JWKS key's \"", field, "\" is not base64url"));
  }
  return out;
}

// Builds a public key from OpenSSL parameters (OpenSSL 3's provider API).
absl::StatusOr<EVP_PKEY*> KeyFromParams(const char* type, OSSL_PARAM_BLD* bld) {
  OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(bld);
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr);
  EVP_PKEY* pkey = nullptr;
  bool ok = params != nullptr && ctx != nullptr && EVP_PKEY_fromdata_init(ctx) == 1 &&
            EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) == 1;
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("JWKS ", type, " key is not a valid public key"));
  return pkey;
}

absl::StatusOr<EVP_PKEY*> RsaKey(const nlohmann::json& jwk) {
  auto n = B64Url(jwk, "n");
  if (!n.ok()) return n.status();
  auto e = B64Url(jwk, "e");
  if (!e.ok()) return e.status();
  if (n->size() < 256) return absl::InvalidArgumentError("JWKS RSA key is shorter than 2048 bits");
  Bn bn_n(BN_bin2bn(reinterpret_cast<const unsigned char*>(n->data()), static_cast<int>(n->size()), nullptr));
  Bn bn_e(BN_bin2bn(reinterpret_cast<const unsigned char*>(e->data()), static_cast<int>(e->size()), nullptr));
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  absl::StatusOr<EVP_PKEY*> key = absl::InternalError("OpenSSL parameter builder failed");
  if (bld != nullptr && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n.get()) == 1 &&
      OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e.get()) == 1) {
    key = KeyFromParams("RSA", bld);
  }
  OSSL_PARAM_BLD_free(bld);
  return key;
}

absl::StatusOr<EVP_PKEY*> EcKey(const nlohmann::json& jwk) {
  if (jwk.value("crv", "") != "P-256") return absl::InvalidArgumentError("JWKS EC key: only crv P-256 is taken");
  auto x = B64Url(jwk, "x");
  if (!x.ok()) return x.status();
  auto y = B64Url(jwk, "y");
  if (!y.ok()) return y.status();
  if (x->size() != 32 || y->size() != 32) return absl::InvalidArgumentError("JWKS EC key: x and y must be 32 bytes");
  std::string point = absl::StrCat("\x04", *x, *y);
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  absl::StatusOr<EVP_PKEY*> key = absl::InternalError("OpenSSL parameter builder failed");
  if (bld != nullptr && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1 &&
      OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()) == 1) {
    key = KeyFromParams("EC", bld);
  }
  OSSL_PARAM_BLD_free(bld);
  return key;
}

// ES256 signatures are r || s (32 bytes each); OpenSSL verifies DER ECDSA-Sig-Value.
absl::StatusOr<std::string> EcdsaRawToDer(const std::string& raw) {
  if (raw.size() != 64) return absl::UnauthenticatedError("ES256 signature must be 64 bytes");
  ECDSA_SIG* sig = ECDSA_SIG_new();
  BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()) + 32, 32, nullptr);
  if (sig == nullptr || r == nullptr || s == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return absl::InternalError("cannot convert the ES256 signature");
  }
  int size = i2d_ECDSA_SIG(sig, nullptr);
  std::string der(size > 0 ? size : 0, '\0');
  unsigned char* p = reinterpret_cast<unsigned char*>(der.data());
  if (size <= 0 || i2d_ECDSA_SIG(sig, &p) != size) der.clear();
  ECDSA_SIG_free(sig);
  if (der.empty()) return absl::InternalError("cannot convert the ES256 signature");
  return der;
}

absl::StatusOr<nlohmann::json> DecodeJsonPart(absl::string_view part, const char* what) {
  std::string text;
  if (!absl::WebSafeBase64Unescape(part, &text)) {
    return absl::UnauthenticatedError(absl::StrCat("malformed JWT: the ", what, " is not base64url"));
  }
  if (NestsDeeperThan(text, 16)) {
    return absl::UnauthenticatedError(absl::StrCat("malformed JWT: the ", what, " nests deeper than 16 levels"));
  }
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::UnauthenticatedError(absl::StrCat("malformed JWT: the ", what, " is not a JSON object"));
  }
  return json;
}

}  // namespace

struct JwtVerifier::Key {
  std::string kid;
  std::string alg;  // RS256 or ES256: the only algorithm this key verifies
  EVP_PKEY* pkey = nullptr;
  ~Key() { EVP_PKEY_free(pkey); }
};

JwtVerifier::JwtVerifier(std::vector<std::unique_ptr<Key>> keys, JwtOptions options, const Clock* clock)
    : keys_(std::move(keys)), options_(std::move(options)), clock_(clock) {}

JwtVerifier::~JwtVerifier() = default;

bool JwtVerifier::LooksLikeJwt(absl::string_view token) {
  return std::count(token.begin(), token.end(), '.') == 2;
}

absl::StatusOr<std::unique_ptr<JwtVerifier>> JwtVerifier::FromJwks(absl::string_view jwks, JwtOptions options,
                                                                   const Clock* clock) {
  if (options.issuer.empty() || options.audience.empty()) {
    return absl::InvalidArgumentError("OIDC needs both an issuer and an audience");
  }
  if (NestsDeeperThan(jwks, 16)) return absl::InvalidArgumentError("JWKS nests deeper than 16 levels");
  auto doc = nlohmann::json::parse(jwks, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array()) {
    return absl::InvalidArgumentError("JWKS must be a JSON object with a \"keys\" array");
  }
  std::vector<std::unique_ptr<Key>> keys;
  for (const auto& jwk : doc["keys"]) {
    if (!jwk.is_object()) return absl::InvalidArgumentError("JWKS keys must be objects");
    if (jwk.value("use", "sig") != "sig") continue;  // encryption keys verify nothing
    auto key = std::make_unique<Key>();
    key->kid = jwk.value("kid", "");
    std::string kty = jwk.value("kty", "");
    absl::StatusOr<EVP_PKEY*> pkey = absl::InvalidArgumentError(
        absl::StrCat("JWKS key \"", key->kid, "\": kty \"", kty, "\" is not taken (RSA or EC)"));
    if (kty == "RSA") {
      key->alg = "RS256";
      pkey = RsaKey(jwk);
    } else if (kty == "EC") {
      key->alg = "ES256";
      pkey = EcKey(jwk);
    }
    if (!pkey.ok()) return pkey.status();
    key->pkey = *pkey;
    if (std::string alg = jwk.value("alg", key->alg); alg != key->alg) {
      return absl::InvalidArgumentError(absl::StrCat("JWKS key \"", key->kid, "\": alg ", alg,
                                                     " does not fit a ", kty, " key (", key->alg, ")"));
    }
    keys.push_back(std::move(key));
  }
  if (keys.empty()) return absl::InvalidArgumentError("JWKS has no signing key");
  return std::unique_ptr<JwtVerifier>(new JwtVerifier(std::move(keys), std::move(options), clock));
}

absl::StatusOr<std::unique_ptr<JwtVerifier>> JwtVerifier::FromJwksFile(const std::string& path, JwtOptions options,
                                                                       const Clock* clock) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the JWKS file ", path));
  std::stringstream text;
  text << in.rdbuf();
  auto verifier = FromJwks(text.str(), std::move(options), clock);
  if (!verifier.ok()) {
    return absl::Status(verifier.status().code(), absl::StrCat(path, ": ", verifier.status().message()));
  }
  return verifier;
}

const JwtVerifier::Key* JwtVerifier::KeyFor(const nlohmann::json& header, std::string* why) const {
  std::string alg = header.contains("alg") && header["alg"].is_string() ? header["alg"].get<std::string>() : "";
  if (alg != "RS256" && alg != "ES256") {
    *why = absl::StrCat("JWT algorithm \"", alg, "\" is not accepted (RS256 or ES256)");
    return nullptr;
  }
  std::string kid = header.contains("kid") && header["kid"].is_string() ? header["kid"].get<std::string>() : "";
  const Key* found = nullptr;
  for (const auto& key : keys_) {
    if (kid.empty() ? keys_.size() == 1 : key->kid == kid) found = key.get();
  }
  if (found == nullptr) {
    *why = kid.empty() ? "JWT names no key (kid) and the JWKS has several" : absl::StrCat("JWT key \"", kid, "\" is not in the JWKS");
    return nullptr;
  }
  if (found->alg != alg) {
    *why = absl::StrCat("JWT algorithm ", alg, " does not fit key \"", kid, "\" (", found->alg, ")");
    return nullptr;
  }
  return found;
}

absl::StatusOr<nlohmann::json> JwtVerifier::Verify(absl::string_view token) const {
  if (token.size() > kMaxTokenBytes) return absl::UnauthenticatedError("JWT is larger than 16 KiB");
  std::vector<absl::string_view> parts = absl::StrSplit(token, '.');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty()) {
    return absl::UnauthenticatedError("malformed JWT: expected header.payload.signature");
  }
  auto header = DecodeJsonPart(parts[0], "header");
  if (!header.ok()) return header.status();
  std::string why;
  const Key* key = KeyFor(*header, &why);
  if (key == nullptr) return absl::UnauthenticatedError(why);

  std::string signature;
  if (!absl::WebSafeBase64Unescape(parts[2], &signature) || signature.empty()) {
    return absl::UnauthenticatedError("malformed JWT: the signature is not base64url");
  }
  if (key->alg == "ES256") {
    auto der = EcdsaRawToDer(signature);
    if (!der.ok()) return der.status();
    signature = std::move(*der);
  }
  absl::string_view signed_part = token.substr(0, parts[0].size() + 1 + parts[1].size());
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  bool valid = md != nullptr && EVP_DigestVerifyInit(md, nullptr, EVP_sha256(), nullptr, key->pkey) == 1 &&
               EVP_DigestVerify(md, reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                                reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size()) == 1;
  EVP_MD_CTX_free(md);
  if (!valid) return absl::UnauthenticatedError("JWT signature does not verify");

  auto claims = DecodeJsonPart(parts[1], "payload");
  if (!claims.ok()) return claims.status();
  const nlohmann::json& c = *claims;
  int64_t now = absl::ToUnixSeconds(clock_->Now());
  int64_t leeway = absl::ToInt64Seconds(options_.leeway);
  if (!c.contains("exp") || !c["exp"].is_number()) return absl::UnauthenticatedError("JWT has no exp");
  if (now > c["exp"].get<int64_t>() + leeway) return absl::UnauthenticatedError("JWT has expired");
  if (c.contains("nbf")) {
    if (!c["nbf"].is_number()) return absl::UnauthenticatedError("JWT nbf is not a number");
    if (now + leeway < c["nbf"].get<int64_t>()) return absl::UnauthenticatedError("JWT is not valid yet (nbf)");
  }
  if (!c.contains("iss") || !c["iss"].is_string() || c["iss"].get<std::string>() != options_.issuer) {
    return absl::UnauthenticatedError(absl::StrCat("JWT issuer is not ", options_.issuer));
  }
  bool audience_ok = false;
  if (c.contains("aud")) {
    const auto& aud = c["aud"];
    if (aud.is_string()) audience_ok = aud.get<std::string>() == options_.audience;
    if (aud.is_array()) {
      for (const auto& a : aud) audience_ok = audience_ok || (a.is_string() && a.get<std::string>() == options_.audience);
    }
  }
  if (!audience_ok) return absl::UnauthenticatedError(absl::StrCat("JWT audience does not include ", options_.audience));
  return claims;
}

}  // namespace jc::auth
