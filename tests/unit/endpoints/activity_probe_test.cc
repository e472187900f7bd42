// Idle limits (SPEC A17): what a replica says of its own use at its activity path.
#include "services/endpoints/activity_probe.h"

#include <catch2/catch.hpp>

using jc::endpoints::ActivityRequest;
using jc::endpoints::LastActivityOf;

TEST_CASE("a replica's activity path is asked as HTTP/1.0 with the job's token, its last_activity read as Jupyter "
          "writes it, and any other answer is no answer [A17]",
          "[A17]") {
  const std::string asked = ActivityRequest("job-00000001-0-0-jupyter.endpoints.localhost:8081", "/api/status", "s3cret");
  CHECK(asked ==
        "GET /api/status HTTP/1.0\r\nHost: job-00000001-0-0-jupyter.endpoints.localhost:8081\r\n"
        "Authorization: token s3cret\r\nAccept: application/json\r\nConnection: close\r\n"
        "User-Agent: jointcloud-idle-check\r\n\r\n");
  CHECK(ActivityRequest("h", "/s", "").find("Authorization") == std::string::npos);

  // Jupyter Notebook 6's /api/status, as it answers.
  auto at = LastActivityOf(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 107\r\n\r\n"
      R"({"connections": 0, "kernels": 1, "last_activity": "2026-11-30T11:42:11.430258Z", "started": "2026-11-30T11:40:02.000000Z"})");
  REQUIRE(at.ok());
  CHECK(*at == absl::FromUnixMicros(1796038931430258));
  auto offset = LastActivityOf("HTTP/1.0 200 OK\r\n\r\n{\"last_activity\": \"2026-11-30T12:42:11+01:00\"}");
  REQUIRE(offset.ok());
  CHECK(*offset == absl::FromUnixSeconds(1796038931));

  for (const char* bad : {
           "HTTP/1.1 403 Forbidden\r\n\r\n{\"last_activity\": \"2026-11-30T11:42:11Z\"}",  // not 200
           "HTTP/1.1 200 OK\r\n\r\n[\"2026-11-30T11:42:11Z\"]",                           // not an object
           "HTTP/1.1 200 OK\r\n\r\n{\"last_activity\": 1796038931}",                       // not a string
           "HTTP/1.1 200 OK\r\n\r\n{\"last_activity\": \"yesterday\"}",                    // not a time
           "HTTP/1.1 200 OK\r\n\r\n{\"kernels\": 1}",                                      // none
           "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n",                                    // no whole head
           "SSH-2.0-OpenSSH_9.2\r\n\r\n",                                                  // not HTTP
       }) {
    INFO(bad);
    CHECK(absl::IsInvalidArgument(LastActivityOf(bad).status()));
  }
}
