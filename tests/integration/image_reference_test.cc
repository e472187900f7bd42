// Catalog images name their content (issue 30 item 1, SPEC A4): an OCI reference resolved
// at registration, against a real registry (docker-registry with TLS and a pull
// credential, images built here from busybox): the digest is what runs, a tag that moves
// later changes no registered image, and every way a reference can be wrong is a clear 4xx
// (or 503 for a registry that cannot be reached) that writes nothing.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/testing/oci_registry.h"
#include "tests/testing/test_system.h"

namespace {

using json = nlohmann::json;

json Image(const std::string& id, const std::string& reference) {
  return {{"image_id", id}, {"name", id}, {"ai_center_id", "c1"}, {"framework", "PyTorch"}, {"reference", reference}};
}

}  // namespace

TEST_CASE("an image registered by reference runs its digest: resolved at registration from a real registry with TLS "
          "and credentials, unchanged when the tag moves, and a bad reference is a clear error that writes nothing "
          "[A4]",
          "[A4]") {
  auto dir = std::filesystem::temp_directory_path() / ("jc-oci-registry-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  auto registry = jc::testing::OciRegistry::Start(dir.string(), JC_SOURCE_DIR);
  INFO(registry.status().ToString());
  REQUIRE(registry.ok());
  const std::string host = (*registry)->host();
  auto first = (*registry)->Push("demo/app", "v1", "first build");
  INFO(first.status().ToString());
  REQUIRE(first.ok());

  jc::testing::TestSystem s([&](jc::server::AppOptions& o) {
    o.registries.ca_file = (*registry)->ca_file();
    o.registries.auth_file = (*registry)->auth_file();
  });
  REQUIRE(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "c1"}, {"name", "c1"}, {"region", "north"},
                                               {"capacity", {{"cpu", 16}, {"memory", 65536}}}})
              .http_status == 200);

  auto registered = s.rest->Post("/openapi/v1/images", Image("app", host + "/demo/app:v1"));
  INFO(registered.body.dump());
  REQUIRE(registered.http_status == 200);
  json image = registered.body["data"];
  CHECK(image["reference"] == host + "/demo/app:v1");
  CHECK(image["digest"] == *first);
  CHECK(image["platform"] == "linux/amd64");
  CHECK(image["size_mb"].get<double>() > 0.1);  // busybox

  // The tag moves to another build: the registered image still runs the first, a new
  // registration gets the second, and a reference pinned by digest gets what it pins.
  auto second = (*registry)->Push("demo/app", "v1", "second build");
  REQUIRE(second.ok());
  REQUIRE(*second != *first);
  CHECK(s.rest->Get("/openapi/v1/images/app").body["data"]["digest"] == *first);
  auto moved = s.rest->Post("/openapi/v1/images", Image("app-later", host + "/demo/app:v1"));
  INFO(moved.body.dump());
  CHECK(moved.body["data"]["digest"] == *second);
  auto pinned = s.rest->Post("/openapi/v1/images", Image("app-pinned", host + "/demo/app@" + *first));
  INFO(pinned.body.dump());
  CHECK(pinned.body["data"]["digest"] == *first);
  // An image without a reference stays valid: it runs bare where a center runs commands bare.
  json bare = Image("bare", "");
  bare.erase("reference");
  auto bare_registered = s.rest->Post("/openapi/v1/images", bare);
  CHECK(bare_registered.http_status == 200);
  CHECK(bare_registered.body["data"].value("digest", "") == "");

  // Every way of being wrong: the status, what it says, and nothing written.
  auto arm = (*registry)->Push("demo/arm", "v1", "not for these hosts", "arm64");
  REQUIRE(arm.ok());
  json pinned_digest = Image("x", host + "/demo/app:v1");
  pinned_digest["digest"] = *first;
  const struct {
    const char* what;
    json body;
    int status;
    std::string says;
  } wrong[] = {
      {"an unknown tag", Image("x", host + "/demo/app:nope"), 400, "unknown image reference"},
      {"an unknown repository", Image("x", host + "/demo/none:v1"), 400, "has no demo/none"},
      {"a registry whose credentials are not configured", Image("x", "localhost:" + host.substr(host.find(':') + 1) + "/demo/app:v1"),
       400, "none are configured for it (--registry_auth_file)"},
      {"an image for another platform", Image("x", host + "/demo/arm:v1"), 400, "is for linux/arm64, not linux/amd64"},
      {"an upper-case repository", Image("x", host + "/Demo/App:v1"), 400, "is not a repository name part"},
      {"a malformed digest", Image("x", host + "/demo/app@sha256:1234"), 400, "64 lower-case hex digits"},
      {"a digest given beside the reference", pinned_digest, 400, "write it in the reference"},
      {"a registry nobody listens at", Image("x", "127.0.0.1:1/demo/app:v1"), 503, "cannot reach registry 127.0.0.1:1"},
  };
  for (const auto& w : wrong) {
    auto r = s.rest->Post("/openapi/v1/images", w.body);
    INFO(w.what << ": " << r.body.dump());
    CHECK(r.http_status == w.status);
    CHECK_THAT(r.body.value("errorMsg", ""), Catch::Contains(w.says));
    CHECK(s.rest->Get("/openapi/v1/images/x").http_status == 404);
  }
  // What runs is set at registration: an update may not change it.
  auto changed = s.rest->Send("PATCH", "/openapi/v1/images/app",
                              json{{"reference", host + "/demo/app:v2"}}.dump());
  INFO(changed.body.dump());
  CHECK(changed.http_status == 400);
  CHECK(s.rest->Get("/openapi/v1/images/app").body["data"]["digest"] == *first);
  std::filesystem::remove_all(dir);
}
