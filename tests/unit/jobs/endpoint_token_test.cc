// The endpoint listener's proof to a replica (SPEC A17, C6): one token per port of each
// replica's attempt, so that one port's token opens no other.
#include "services/jobs/endpoint_token.h"

#include <catch2/catch.hpp>
#include <set>

namespace jc::jobs {

TEST_CASE("an endpoint token is the job secret's own for one port of an attempt: another port, replica, "
          "task, attempt or job has another, and a job without a secret has none [A17][C6]",
          "[A17][C6]") {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  const std::string token = EndpointToken(secret, "job-00000001", 0, 0, 0, "jupyter");
  CHECK(token.size() == 43);  // 32 bytes, base64url without padding
  CHECK(token.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
        std::string::npos);
  CHECK(EndpointToken(secret, "job-00000001", 0, 0, 0, "jupyter") == token);  // the listener's and the replica's agree
  std::set<std::string> tokens{token,
                               EndpointToken(secret, "job-00000001", 0, 0, 0, "http"),
                               EndpointToken(secret, "job-00000001", 0, 1, 0, "jupyter"),
                               EndpointToken(secret, "job-00000001", 1, 0, 0, "jupyter"),
                               EndpointToken(secret, "job-00000001", 0, 0, 1, "jupyter"),
                               EndpointToken(secret, "job-00000002", 0, 0, 0, "jupyter"),
                               EndpointToken("another secret of 32 bytes......", "job-00000001", 0, 0, 0, "jupyter"),
                               // Fields run together otherwise ("1" "10" vs "11" "0"): kept apart.
                               EndpointToken(secret, "job-00000001", 1, 10, 0, "jupyter"),
                               EndpointToken(secret, "job-00000001", 11, 0, 0, "jupyter")};
  CHECK(tokens.size() == 9);
  CHECK(EndpointToken("", "job-00000001", 0, 0, 0, "jupyter").empty());
  CHECK(EndpointTokenEnvName("my-port") == "JC_ENDPOINT_TOKEN_MY_PORT");
}

}  // namespace jc::jobs
