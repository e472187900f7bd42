#pragma once

// The shape of API tokens: "jc_<id>_<secret>", a 16-hex-digit id (stored, listed, revoked
// by) and a 256-bit random secret in web-safe base64 (stored only as its SHA-256). The
// random bytes come from OpenSSL's CSPRNG; the prefix lets a secret scanner find leaked
// tokens and lets the server tell them apart from OIDC bearer tokens.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::auth {

struct ApiTokenParts {
  std::string id;
  std::string secret;
};

// A new token: its id, its secret, and the whole string to hand out once.
struct NewApiToken {
  std::string id;
  std::string secret_sha256;  // hex, what the store keeps
  std::string token;          // jc_<id>_<secret>
};

bool LooksLikeApiToken(absl::string_view token);
absl::StatusOr<ApiTokenParts> ParseApiToken(absl::string_view token);
absl::StatusOr<NewApiToken> GenerateApiToken();
// Lower-case hex SHA-256.
std::string Sha256Hex(absl::string_view data);
// Compares in time independent of where the two differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);
// `bytes` random bytes from the CSPRNG, web-safe base64 without padding.
absl::StatusOr<std::string> RandomSecret(size_t bytes = 32);

}  // namespace jc::auth
