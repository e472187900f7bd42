#pragma once

// The token handshake of the OCI distribution API (Docker's token auth): a registry answers
// 401 with `WWW-Authenticate: Bearer realm="https://...",service="...",scope="..."`, and the
// realm answers a token in JSON. Both are outside input, read here as pure functions of the
// text (fuzzed by tests/fuzz/oci_token_fuzz.cc).

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::oci {

// A challenge (RFC 7235): its scheme and its parameters, names in lower case.
struct Challenge {
  std::string scheme;  // as sent: "Bearer", "Basic"
  std::map<std::string, std::string> params;
};

// The first challenge of a WWW-Authenticate header. Quoted values may hold commas and
// escaped quotes (scope="repository:a/b:pull,push"). DataLoss for a header past 4 KiB, no
// scheme, a parameter without '=' or an unterminated quoted value.
absl::StatusOr<Challenge> ParseChallenge(absl::string_view header);

// The token of a token service's answer: {"token": "..."} or {"access_token": "..."}.
// DataLoss for anything else: not a JSON object, a token that is not a string, empty, longer
// than 64 KiB, or with characters a token does not have (the token goes into a request
// header: a CR or LF there would inject headers).
absl::StatusOr<std::string> ParseTokenAnswer(absl::string_view body);

}  // namespace jc::oci
