#include "services/jobs/endpoint_token.h"

#include <openssl/evp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/hmac_sha256.h"

namespace jc::jobs {

std::string EndpointToken(absl::string_view secret, absl::string_view job_id, int task_index, int replica_index,
                          int64_t attempt, absl::string_view port_name) {
  if (secret.empty()) return "";
  // NUL between the fields: no two endpoints' messages are the same bytes.
  const std::string message = absl::StrCat("jointcloud-endpoint-token-v1", std::string(1, '\0'), job_id,
                                           std::string(1, '\0'), task_index, std::string(1, '\0'), replica_index,
                                           std::string(1, '\0'), attempt, std::string(1, '\0'), port_name);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  length = HmacSha256(secret, message, mac);
  return absl::WebSafeBase64Escape(absl::string_view(reinterpret_cast<const char*>(mac), length));
}

std::string EndpointTokenEnvName(absl::string_view port_name) {
  std::string out = absl::StrCat("JC_ENDPOINT_TOKEN_", absl::AsciiStrToUpper(port_name));
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

}  // namespace jc::jobs
