// libFuzzer harness: the token handshake of registries (issue 44): a WWW-Authenticate
// challenge, the realm it names (the address the client would send credentials to), and
// the token service's answer. The first byte chooses which; the rest is the text. A token
// that is accepted must be safe to put in a request header.
#include <cstddef>
#include <cstdint>

#include "common/oci/origin.h"
#include "common/oci/token_auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto token = jc::oci::ParseTokenAnswer(text);
    if (token.ok()) {
      if (token->empty()) __builtin_trap();
      for (char c : *token) {
        if (c == '\r' || c == '\n' || c == ' ' || c == '\0') __builtin_trap();  // header injection
      }
    }
    return 0;
  }
  auto challenge = jc::oci::ParseChallenge(text);
  if (!challenge.ok()) return 0;
  if (challenge->scheme.empty()) __builtin_trap();
  const jc::oci::Origin registry{"registry.example.com", 443};
  auto realm = jc::oci::ParseLocation(challenge->params["realm"], registry);
  if (realm.ok()) {
    if (realm->origin.host.empty() || realm->origin.port < 1 || realm->origin.port > 65535) __builtin_trap();
    if (realm->path.empty() || realm->path[0] != '/') __builtin_trap();
  }
  (void)jc::oci::ParseHostPort(text);
  return 0;
}
