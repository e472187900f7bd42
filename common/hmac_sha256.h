#pragma once

// HMAC-SHA-256 with the keyed state kept per thread.
//
// OpenSSL 3's one-shot HMAC() fetches the MAC and then the digest by name from its provider
// tables on every call: measured here, 2.4 µs for 200 bytes against 0.6 µs re-initialising
// a context keyed once, which takes the key's padded digests as they were. A nexec session's
// key signs every call and frame of its session (issue 48: the signatures were 2–4% of the
// master's, the agents' and the client's CPU per job). So each thread keeps the contexts of
// the last few keys it used; a key it has not kept is keyed anew.

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>

#include <array>
#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "common/sha256_md.h"

namespace jc {

// Writes the 32-byte MAC of `data` under `key` to `out`; returns its size (32).
inline unsigned int HmacSha256(absl::string_view key, absl::string_view data, unsigned char out[EVP_MAX_MD_SIZE]) {
  struct KeyedContext {
    std::string key;
    EVP_MAC_CTX* ctx = nullptr;
    ~KeyedContext() {
      if (ctx != nullptr) EVP_MAC_CTX_free(ctx);
      OPENSSL_cleanse(key.data(), key.size());
    }
  };
  static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  thread_local std::array<KeyedContext, 8> kept;
  thread_local size_t next = 0;
  auto one_shot = [&] {
    unsigned int size = 0;
    HMAC(Sha256Md(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
         data.size(), out, &size);
    return size;
  };
  // An empty key would read as "the key set before" to EVP_MAC_init.
  if (hmac == nullptr || key.empty()) return one_shot();
  KeyedContext* slot = nullptr;
  for (KeyedContext& k : kept) {
    if (k.ctx != nullptr && k.key.size() == key.size() && CRYPTO_memcmp(k.key.data(), key.data(), key.size()) == 0) {
      slot = &k;
      break;
    }
  }
  bool keyed = false;
  if (slot != nullptr) {
    keyed = EVP_MAC_init(slot->ctx, nullptr, 0, nullptr) == 1;  // the same key again
  } else {
    slot = &kept[next++ % kept.size()];
    if (slot->ctx == nullptr) slot->ctx = EVP_MAC_CTX_new(hmac);
    OPENSSL_cleanse(slot->key.data(), slot->key.size());
    slot->key.assign(key.data(), key.size());
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                 OSSL_PARAM_construct_end()};
    keyed = slot->ctx != nullptr &&
            EVP_MAC_init(slot->ctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) == 1;
  }
  size_t size = 0;
  if (!keyed || EVP_MAC_update(slot->ctx, reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1 ||
      EVP_MAC_final(slot->ctx, out, &size, EVP_MAX_MD_SIZE) != 1) {
    if (slot->ctx != nullptr) EVP_MAC_CTX_free(slot->ctx);
    slot->ctx = nullptr;  // keyed anew next time
    return one_shot();
  }
  return static_cast<unsigned int>(size);
}

}  // namespace jc
