// HMAC-SHA-256 with keyed contexts kept per thread (common/hmac_sha256.h): every MAC is
// the one OpenSSL's one-shot HMAC() gives, whichever keys come in whichever order, on any
// thread (SPEC C6: nexec identity through munge; every call and stream frame is signed under its session's key, B9).

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/hmac_sha256.h"

namespace {

std::string Mac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  const unsigned int size = jc::HmacSha256(key, data, out);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(out), size));
}

std::string OneShot(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &size);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(out), size));
}

}  // namespace

TEST_CASE("HMAC-SHA-256 with kept keyed contexts gives RFC 4231's MACs and the one-shot HMAC's for any order of keys",
          "[B9][C6]") {
  // RFC 4231, test case 2.
  CHECK(Mac("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Twenty keys (more than a thread keeps) in turn, twice, each with messages of many
  // sizes: a key kept, one keyed anew, one whose slot another key took meanwhile.
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 20; ++k) {
      const std::string key = absl::StrCat("session-key-", k, std::string(static_cast<size_t>(k), 'x'));
      for (size_t size : {0, 1, 63, 64, 65, 200, 5000}) {
        const std::string data(size, static_cast<char>('a' + k));
        CHECK(Mac(key, data) == OneShot(key, data));
      }
    }
  }
  // Keys that share a prefix, or one that is another's prefix, are not taken for each other.
  CHECK(Mac("key", "m") == OneShot("key", "m"));
  CHECK(Mac("key2", "m") == OneShot("key2", "m"));
  CHECK(Mac("key", "m") != Mac("key2", "m"));
  // An empty key (which EVP_MAC_init would read as "the key before") and a key longer than
  // SHA-256's block (hashed first).
  CHECK(Mac("", "m") == OneShot("", "m"));
  const std::string long_key(300, 'L');
  CHECK(Mac(long_key, "m") == OneShot(long_key, "m"));
  CHECK(Mac("key", "m") == OneShot("key", "m"));
}

TEST_CASE("HMAC-SHA-256's kept contexts are each thread's own", "[B9][C6]") {
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < 500; ++i) {
        const std::string key = absl::StrCat("k", (t + i) % 11);
        const std::string data = absl::StrCat("message ", t, " ", i);
        if (Mac(key, data) != OneShot(key, data)) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) CHECK(wrong[t] == 0);
}
