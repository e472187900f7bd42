#include "common/auth/api_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256_md.h"

namespace jc::auth {
namespace {

constexpr absl::string_view kPrefix = "jc_";
constexpr size_t kIdHexDigits = 16;

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

bool LooksLikeApiToken(absl::string_view token) { return absl::StartsWith(token, kPrefix); }

absl::StatusOr<ApiTokenParts> ParseApiToken(absl::string_view token) {
  constexpr auto kMalformed = "malformed API token: expected jc_<16 hex digits>_<secret>";
  if (!LooksLikeApiToken(token)) return absl::UnauthenticatedError(kMalformed);
  absl::string_view rest = token.substr(kPrefix.size());
  if (rest.size() < kIdHexDigits + 2 || rest[kIdHexDigits] != '_') return absl::UnauthenticatedError(kMalformed);
  absl::string_view id = rest.substr(0, kIdHexDigits);
  absl::string_view secret = rest.substr(kIdHexDigits + 1);
  if (!IsLowerHex(id) || secret.size() > 256) return absl::UnauthenticatedError(kMalformed);
  return ApiTokenParts{std::string(id), std::string(secret)};
}

absl::StatusOr<std::string> RandomSecret(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw.size())) != 1) {
    return absl::InternalError("the random number generator failed");
  }
  return absl::WebSafeBase64Escape(raw);
}

absl::StatusOr<NewApiToken> GenerateApiToken() {
  std::string id_bytes(kIdHexDigits / 2, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(id_bytes.data()), static_cast<int>(id_bytes.size())) != 1) {
    return absl::InternalError("the random number generator failed");
  }
  auto secret = RandomSecret();
  if (!secret.ok()) return secret.status();
  NewApiToken t;
  t.id = absl::BytesToHexString(id_bytes);
  t.secret_sha256 = Sha256Hex(*secret);
  t.token = absl::StrCat(kPrefix, t.id, "_", *secret);
  return t;
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, Sha256Md(), nullptr);  // fetched once (sha256_md.h)
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace jc::auth
