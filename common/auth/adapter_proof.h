#pragma once

// How an adapter proves which center it is (issue 44, hole 5). The control plane issues
// each center a random key (IssueAdapterKey) and keeps it; the center's adapter reads it
// from its --center_key_file. On every new connection, and again every few seconds, the
// control plane sends a fresh challenge in GetCenterInfo and the adapter answers
//   HMAC-SHA256(key, "jointcloud-adapter-proof-v1" NUL ai_center_id NUL challenge).
// Another center's adapter, a process that took over an adapter's socket, or a proxy
// cannot answer for a center whose key it does not hold, whatever id it claims; the id is
// inside the MAC, so one center's key never proves another center.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace jc::auth {

// The keys a center's adapter may prove with: the current one, and the one it replaced
// until `previous_until` (rotation without an outage).
struct AdapterKeys {
  std::string current;
  std::string previous;
  absl::Time previous_until = absl::InfinitePast();
};

inline constexpr size_t kAdapterChallengeBytes = 32;

// A new key to issue: "jcak_" and 256 random bits, web-safe base64.
absl::StatusOr<std::string> NewAdapterKey();
// A fresh challenge (kAdapterChallengeBytes raw bytes).
absl::StatusOr<std::string> NewAdapterChallenge();
// The adapter's answer: 32 raw bytes.
std::string AdapterProof(absl::string_view key, absl::string_view center_id, absl::string_view challenge);
// Whether `proof` answers `challenge` for `center_id` under the current key, or under the
// previous one while it is still valid at `now`. Constant time in the proof.
bool AdapterProofMatches(const AdapterKeys& keys, absl::Time now, absl::string_view center_id,
                         absl::string_view challenge, absl::string_view proof);
// Reads an adapter's key file: it must be a regular file owned by this process's user and
// readable by nobody else (mode & 077 == 0), holding one key as NewAdapterKey makes them.
absl::StatusOr<std::string> ReadAdapterKeyFile(const std::string& path);

}  // namespace jc::auth
