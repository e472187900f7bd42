#include "tests/testing/jwt_issuer.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <stdexcept>

#include "absl/strings/escaping.h"

namespace jc::testing {
namespace {

std::string B64(const std::string& raw) { return absl::WebSafeBase64Escape(raw); }

std::string BnBytes(EVP_PKEY* key, const char* name) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &bn) != 1) throw std::runtime_error("EVP_PKEY_get_bn_param");
  std::string out(BN_num_bytes(bn), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  BN_free(bn);
  return out;
}

std::string DigestSign(EVP_PKEY* key, const std::string& data) {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  size_t size = 0;
  EVP_DigestSignInit(md, nullptr, EVP_sha256(), nullptr, key);
  EVP_DigestSign(md, nullptr, &size, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  std::string sig(size, '\0');
  EVP_DigestSign(md, reinterpret_cast<unsigned char*>(sig.data()), &size,
                 reinterpret_cast<const unsigned char*>(data.data()), data.size());
  sig.resize(size);
  EVP_MD_CTX_free(md);
  return sig;
}

// DER ECDSA-Sig-Value -> r || s, as JWS wants it.
std::string EcdsaDerToRaw(const std::string& der) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  ECDSA_SIG_get0(sig, &r, &s);
  std::string raw(64, '\0');
  BN_bn2binpad(r, reinterpret_cast<unsigned char*>(raw.data()), 32);
  BN_bn2binpad(s, reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
  ECDSA_SIG_free(sig);
  return raw;
}

}  // namespace

struct JwtIssuer::Keys {
  EVP_PKEY* rsa = nullptr;
  EVP_PKEY* ec = nullptr;
  EVP_PKEY* foreign = nullptr;
  ~Keys() {
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(foreign);
  }
};

JwtIssuer::JwtIssuer() : keys_(std::make_unique<Keys>()) {
  keys_->rsa = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048});
  keys_->ec = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  keys_->foreign = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048});
  if (keys_->rsa == nullptr || keys_->ec == nullptr || keys_->foreign == nullptr) {
    throw std::runtime_error("key generation failed");
  }
}

JwtIssuer::~JwtIssuer() = default;

std::string JwtIssuer::Jwks() const {
  unsigned char point[65];
  size_t size = 0;
  EVP_PKEY_get_octet_string_param(keys_->ec, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point), &size);
  std::string p(reinterpret_cast<const char*>(point), size);
  nlohmann::json jwks = {
      {"keys",
       {{{"kty", "RSA"}, {"kid", "rsa-1"}, {"use", "sig"}, {"alg", "RS256"},
         {"n", B64(BnBytes(keys_->rsa, OSSL_PKEY_PARAM_RSA_N))}, {"e", B64(BnBytes(keys_->rsa, OSSL_PKEY_PARAM_RSA_E))}},
        {{"kty", "EC"}, {"kid", "ec-1"}, {"crv", "P-256"}, {"x", B64(p.substr(1, 32))}, {"y", B64(p.substr(33, 32))}}}}};
  return jwks.dump();
}

std::string JwtIssuer::Sign(const nlohmann::json& claims, const std::string& alg) const {
  nlohmann::json header = {{"alg", alg}, {"typ", "JWT"}, {"kid", alg == "ES256" ? "ec-1" : "rsa-1"}};
  return SignRaw(header, claims, alg);
}

std::string JwtIssuer::SignRaw(const nlohmann::json& header, const nlohmann::json& claims,
                               const std::string& sign_as) const {
  std::string input = B64(header.dump()) + "." + B64(claims.dump());
  std::string sig;
  if (sign_as == "RS256") {
    sig = DigestSign(keys_->rsa, input);
  } else if (sign_as == "ES256") {
    sig = EcdsaDerToRaw(DigestSign(keys_->ec, input));
  } else if (sign_as == "foreign") {
    sig = DigestSign(keys_->foreign, input);
  } else if (sign_as == "HS256-public") {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PUBKEY(bio, keys_->rsa);
    char* pem = nullptr;
    long pem_size = BIO_get_mem_data(bio, &pem);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_size = 0;
    HMAC(EVP_sha256(), pem, static_cast<int>(pem_size), reinterpret_cast<const unsigned char*>(input.data()),
         input.size(), mac, &mac_size);
    BIO_free(bio);
    sig.assign(reinterpret_cast<const char*>(mac), mac_size);
  }  // "none": no signature
  return input + "." + B64(sig);
}

}  // namespace jc::testing
