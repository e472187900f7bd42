// Catalog images name their content (issue 30 item 1, SPEC A4): an OCI reference resolved
// at registration, against a real registry (docker-registry with TLS and a pull
// credential, images built here from busybox): the digest is what runs, a tag that moves
// later changes no registered image, and every way a reference can be wrong is a clear 4xx
// (or 503 for a registry that cannot be reached) that writes nothing.

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "tests/testing/fake_registry.h"
#include "tests/testing/oci_registry.h"
#include "tests/testing/test_system.h"

namespace {

using json = nlohmann::json;

json Image(const std::string& id, const std::string& reference) {
  return {{"image_id", id}, {"name", id}, {"ai_center_id", "c1"}, {"framework", "PyTorch"}, {"reference", reference}};
}

// The peak of this process's resident memory (VmHWM): the whole control plane runs here.
int64_t PeakRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
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

TEST_CASE("a slow or huge registry does not take the control plane down: 70 dripping registrations and a gibibyte "
          "manifest leave other calls answered, memory bounded and the shutdown prompt [A4][C7]",
          "[A4][C7]") {
  auto dir = std::filesystem::temp_directory_path() / ("jc-fake-registry-it-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  auto started = jc::testing::FakeRegistry::Start(dir.string(), JC_SOURCE_DIR);
  INFO(started.status().ToString());
  REQUIRE(started.ok());
  jc::testing::FakeRegistry& registry = **started;
  std::atomic<int> dripping{0};
  // The attack: a manifest dripped a byte at a time, for ever; and a gibibyte one.
  registry.server().Get("/v2/slow/app/manifests/v1", [&](const httplib::Request&, httplib::Response& res) {
    ++dripping;
    res.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink& sink) {
      if (registry.stopping()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return sink.write("{", 1);
    });
  });
  constexpr size_t kGiB = size_t{1} << 30;
  registry.server().Get("/v2/huge/app/manifests/v1", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content_provider(kGiB, "application/json", [&](size_t offset, size_t, httplib::DataSink& sink) {
      static const std::string chunk(1 << 16, ' ');
      return !registry.stopping() && sink.write(chunk.data(), std::min(chunk.size(), kGiB - offset));
    });
  });
  jc::testing::TestSystem s([&](jc::server::AppOptions& o) {
    o.registries.ca_file = registry.ca_file();
    o.registries.timeout = absl::Hours(1);  // only the caller's cancellation or the shutdown ends a dripping one
  });
  REQUIRE(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "c1"}, {"name", "c1"}, {"region", "north"},
                                               {"capacity", {{"cpu", 16}, {"memory", 65536}}}})
              .http_status == 200);
  const std::string host = registry.host();

  // A gibibyte manifest is refused at the limit, and costs the limit.
  const int64_t before = PeakRss();
  auto huge = s.rest->Post("/openapi/v1/images", Image("huge", host + "/huge/app:v1"));
  INFO(huge.body.dump());
  CHECK(huge.http_status == 400);
  CHECK_THAT(huge.body.value("errorMsg", ""), Catch::Contains("answered more than 4194304 bytes"));

  // 70 registrations from the dripping registry: 8 (--registry_max_concurrent) wait on it,
  // the others are refused at once with 429; no request thread is held past those 8.
  constexpr int kRegistrations = 70;
  std::vector<std::atomic<int>> statuses(kRegistrations);
  std::mutex said_mu;
  std::set<std::string> said;  // what the refusals say, for a failure's message
  std::vector<std::thread> registrations;
  for (int i = 0; i < kRegistrations; ++i) {
    registrations.emplace_back([&, i] {
      jc::testing::RestClient client(s.app->rest_port(), s.admin_token);
      auto r = client.Post("/openapi/v1/images", Image("slow-" + std::to_string(i), host + "/slow/app:v1"));
      std::lock_guard<std::mutex> lock(said_mu);
      said.insert(r.body.is_object() ? r.body.value("errorMsg", "") : "");
      statuses[i] = r.http_status;
    });
  }
  auto count = [&](int status) {
    int n = 0;
    for (const auto& st : statuses) n += st == status;
    return n;
  };
  const bool held = jc::testing::WaitUntil([&] { return count(429) + dripping == kRegistrations && dripping <= 8; });
  std::string refusals;
  {
    std::lock_guard<std::mutex> lock(said_mu);
    for (const auto& m : said) refusals += m + "; ";
  }
  INFO("429: " << count(429) << ", unanswered: " << count(0) << ", dripping: " << dripping << "; said: " << refusals);
  CHECK(held);

  // Meanwhile every other call is answered.
  int answered = 0;
  for (int i = 0; i < 200; ++i) answered += s.rest->Get("/openapi/v1/centers").http_status == 200;
  CHECK(answered >= 198);
  CHECK(s.rest->Get("/openapi/v1/images/huge").http_status == 404);
  // The limit once for the gibibyte manifest, a few bytes for each dripping one, and a
  // margin for 70 client threads and the TLS buffers.
  CHECK(PeakRss() - before < (4 << 20) + (64 << 20));

  // The server stops promptly with 8 registrations still waiting on the registry.
  auto stopped = std::async(std::launch::async, [&] { s.app->Shutdown(); });
  CHECK(stopped.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  stopped.wait();
  for (auto& t : registrations) t.join();
  CHECK(count(429) >= kRegistrations - 8);
  CHECK(count(200) == 0);
  std::filesystem::remove_all(dir);
}
