#pragma once

// SHA-256 as OpenSSL 3 fetches it, once per process.
//
// EVP_sha256() hands EVP_Digest and HMAC a legacy method that OpenSSL 3 looks up in its
// provider tables again on every call: measured here, that look-up cost as much again as
// hashing a short input (a token, a command, a request's digest). Every digest on a
// per-request path takes the fetched one.

#include <openssl/evp.h>

namespace jc {

inline const EVP_MD* Sha256Md() {
  static EVP_MD* const fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return fetched != nullptr ? fetched : EVP_sha256();
}

}  // namespace jc
