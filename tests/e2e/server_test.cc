// The real `jointcloud` binary, started as a user would, over loopback.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "tests/testing/fake_registry.h"
#include "tests/testing/own_postgres.h"
#include "tests/testing/process.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/test_store.h"

using nlohmann::json;
using jc::testing::Process;

namespace {

std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("jc-e2e-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// The store flags for the backend under test: the embedded store in `dir`, or a fresh
// schema of the test PostgreSQL.
std::vector<std::string> StoreFlags(const std::string& dir) {
  if (jc::testing::TestStoreBackend() == "postgres") {
    std::string schema = "e2e_" + std::to_string(getpid()) + "_" +
                         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    return {"--store=" + std::string(std::getenv("JC_TEST_PG_URI")), "--store_schema=" + schema,
            "--admin_token_file=" + dir + "/admin.token"};
  }
  return {"--data_dir=" + dir, "--admin_token_file=" + dir + "/admin.token"};
}

std::vector<std::string> ServerArgs(const std::vector<std::string>& store,
                                    std::vector<std::string> extra) {
  std::vector<std::string> args{JC_SERVER_BINARY, "--rest_address=127.0.0.1:0",
                                "--grpc_address=127.0.0.1:0", "--admin_address=127.0.0.1:0"};
  args.insert(args.end(), store.begin(), store.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("the server keeps what it acknowledged across SIGKILL and restart", "[C1][C2][C5]") {
  std::string dir = TempDir("restart");
  auto store = StoreFlags(dir);
  std::string rest_port;
  {
    Process server(ServerArgs(store, {}), dir + "/server1.log");
    auto port = server.WaitForLog(R"(rest listening on http://127\.0\.0\.1:(\d+))");
    INFO(server.Log());
    REQUIRE(port.has_value());
    jc::testing::RestClient rest(std::stoi(*port), jc::testing::AdminToken(dir + "/admin.token"));
    json center = {{"ai_center_id", "kept"}, {"name", "Kept"}, {"region", "north"}};
    REQUIRE(rest.Post("/openapi/v1/centers", center).http_status == 200);
    server.Signal(SIGKILL);
    REQUIRE(server.Wait().has_value());
  }
  Process again(ServerArgs(store, {}), dir + "/server2.log");
  auto port = again.WaitForLog(R"(rest listening on http://127\.0\.0\.1:(\d+))");
  INFO(again.Log());
  REQUIRE(port.has_value());
  jc::testing::RestClient rest(std::stoi(*port), jc::testing::AdminToken(dir + "/admin.token"));
  auto got = rest.Get("/openapi/v1/centers/kept");
  CHECK(got.http_status == 200);
  CHECK(got.body["data"]["name"] == "Kept");

  // SIGTERM stops it cleanly with exit code 0.
  again.Signal(SIGTERM);
  auto code = again.Wait();
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("services run as separate processes talking gRPC over the network", "[C1][A13][C4]") {
  std::string dir = TempDir("split");
  auto store = StoreFlags(dir);
  Process backend(ServerArgs(store, {"--services=identity,registry,catalog,datamon"}), dir + "/backend.log");
  auto grpc_port = backend.WaitForLog(R"(grpc listening on port (\d+))");
  auto admin_port = backend.WaitForLog(R"(metrics and health on http://127\.0\.0\.1:(\d+))");
  INFO(backend.Log());
  REQUIRE(grpc_port.has_value());
  REQUIRE(admin_port.has_value());

  Process gateway(ServerArgs({}, {"--services=gateway", "--upstream_address=127.0.0.1:" + *grpc_port}),
                  dir + "/gateway.log");
  auto rest_port = gateway.WaitForLog(R"(rest listening on http://127\.0\.0\.1:(\d+))");
  INFO(gateway.Log());
  REQUIRE(rest_port.has_value());

  jc::testing::RestClient rest(std::stoi(*rest_port), jc::testing::AdminToken(dir + "/admin.token"));
  json center = {{"ai_center_id", "split1"}, {"name", "Split"}, {"region", "west"}};
  REQUIRE(rest.Post("/openapi/v1/centers", center).http_status == 200);
  CHECK(rest.Get("/openapi/v1/centers/split1").body["data"]["region"] == "west");
  CHECK(rest.Get("/readyz").http_status == 200);

  // The back end has no REST routes but still serves health and metrics.
  jc::testing::RestClient admin(std::stoi(*admin_port));
  CHECK(admin.Get("/healthz").http_status == 200);
  CHECK(admin.Get("/readyz").http_status == 200);
  CHECK(jc::testing::WaitUntil(
      [&] { return admin.Raw("/metrics").find("jc_centers{status=\"unknown\"} 1") != std::string::npos; }));

  // Without its upstream the gateway stays up but says it is not ready.
  backend.Signal(SIGTERM);
  REQUIRE(backend.Wait().has_value());
  CHECK(jc::testing::WaitUntil([&] { return rest.Get("/readyz").http_status == 503; }));
  std::filesystem::remove_all(dir);
}

TEST_CASE("servers started together on one empty store leave exactly one admin token that works", "[C6][C3]") {
  // As in the compose stack: every process that opens the store may create the first
  // admin, and they share the token's path.
  // They share a PostgreSQL (the embedded store is one process's): the suite's, or one of
  // this test's own on the embedded-store run.
  std::string dir = TempDir("bootstrap-race");
  auto store = StoreFlags(dir);
  std::unique_ptr<jc::testing::OwnPostgres> own;
  if (jc::testing::TestStoreBackend() != "postgres") {
    own = std::make_unique<jc::testing::OwnPostgres>(dir + "/pg");
    REQUIRE(!own->uri().empty());
    store = {"--store=" + own->uri(), "--admin_token_file=" + dir + "/admin.token"};
  }
  std::vector<std::unique_ptr<Process>> servers;
  for (int i = 0; i < 4; ++i) {
    servers.push_back(std::make_unique<Process>(ServerArgs(store, {}),
                                                dir + "/server" + std::to_string(i) + ".log"));
  }
  std::vector<int> ports;
  for (auto& s : servers) {
    auto port = s->WaitForLog(R"(rest listening on http://127\.0\.0\.1:(\d+))");
    INFO(s->Log());
    REQUIRE(port.has_value());
    ports.push_back(std::stoi(*port));
  }
  std::string token = jc::testing::AdminToken(dir + "/admin.token");
  REQUIRE(!token.empty());
  int created = 0;
  for (auto& s : servers) {
    CHECK(s->Log().find("could not be written") == std::string::npos);
    if (s->Log().find("first start: created the federation admin") != std::string::npos) ++created;
  }
  CHECK(created == 1);
  for (int port : ports) {
    jc::testing::RestClient rest(port, token);
    CHECK(rest.Get("/openapi/v1/whoami").http_status == 200);
  }
  int leftovers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("admin.token.new", 0) == 0) ++leftovers;
  }
  CHECK(leftovers == 0);
  servers.clear();
  own.reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE("bad flags end the server at once with a message and a non-zero exit", "[C5]") {
  std::string dir = TempDir("flags");
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--services=bogus"}, {"--rest_address=nope"},
        {"--store=mysql://x"}, {"--migration_weights=speed=1"},
        {"--center_unknown_after=100s", "--center_unavailable_after=10s"},
        // Tokens in plaintext beyond loopback need TLS or an explicit --plaintext.
        {"--rest_address=0.0.0.0:0", "--grpc_address=127.0.0.1:0"},
        {"--insecure_no_auth", "--grpc_address=0.0.0.0:0", "--rest_address=127.0.0.1:0", "--plaintext"},
        {"--tls_cert=/nonexistent.crt", "--tls_key=/nonexistent.key", "--tls_ca=/nonexistent.crt",
         "--rest_address=127.0.0.1:0", "--grpc_address=127.0.0.1:0"},
        {"--service_token_file=/etc/hostname"}}) {
    std::vector<std::string> args{JC_SERVER_BINARY, "--data_dir=" + dir};
    args.insert(args.end(), flags.begin(), flags.end());
    Process p(args, dir + "/flags.log");
    auto code = p.Wait();
    INFO(flags[0] << "\n" << p.Log());
    REQUIRE(code.has_value());
    CHECK(*code != 0);
    CHECK(p.Log().find(" E ") != std::string::npos);  // one clear error line
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a dripping registry holds no more than 8 request threads: 70 registrations waiting on it leave 200 other "
          "calls answered and the scheduler's refresh running, and SIGTERM ends the server within 10 s [A4][C7]",
          "[A4][C7]") {
  std::string dir = TempDir("registry-drip");
  auto started = jc::testing::FakeRegistry::Start(dir + "/registry", JC_SOURCE_DIR);
  INFO(started.status().ToString());
  REQUIRE(started.ok());
  jc::testing::FakeRegistry& registry = **started;
  std::atomic<int> dripping{0};
  registry.server().Get("/v2/slow/app/manifests/v1", [&](const httplib::Request&, httplib::Response& res) {
    ++dripping;
    res.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink& sink) {
      if (registry.stopping()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the attack: a byte at a time, for ever
      return sink.write("{", 1);
    });
  });
  // A deadline far away: only the shutdown can end the registrations waiting on it.
  Process server(ServerArgs(StoreFlags(dir), {"--registry_ca_file=" + registry.ca_file(), "--registry_timeout=1h"}),
                 dir + "/server.log");
  auto port = server.WaitForLog(R"(rest listening on http://127\.0\.0\.1:(\d+))");
  INFO(server.Log());
  REQUIRE(port.has_value());
  const std::string token = jc::testing::AdminToken(dir + "/admin.token");
  jc::testing::RestClient rest(std::stoi(*port), token);
  REQUIRE(rest.Post("/openapi/v1/centers", {{"ai_center_id", "c1"}, {"name", "c1"}, {"region", "north"}}).http_status ==
          200);

  constexpr int kRegistrations = 70;
  std::vector<std::atomic<int>> statuses(kRegistrations);
  std::vector<std::thread> registrations;
  for (int i = 0; i < kRegistrations; ++i) {
    registrations.emplace_back([&, i] {
      jc::testing::RestClient client(std::stoi(*port), token);
      const std::string id = "slow-" + std::to_string(i);
      statuses[i] = client
                        .Post("/openapi/v1/images", {{"image_id", id}, {"name", id}, {"ai_center_id", "c1"},
                                                     {"framework", "PyTorch"}, {"reference", registry.host() + "/slow/app:v1"}})
                        .http_status;
    });
  }
  auto count = [&](int status) {
    int n = 0;
    for (const auto& st : statuses) n += st == status;
    return n;
  };
  const bool held = jc::testing::WaitUntil([&] { return count(429) + dripping == kRegistrations && dripping <= 8; });
  CHECK(held);
  int answered = 0;
  for (int i = 0; i < 200; ++i) answered += rest.Get("/openapi/v1/centers").http_status == 200;
  CHECK(answered >= 198);
  // The scheduler's refresh (it reads the catalog and the registry over gRPC) still runs: a
  // center registered now reaches its view.
  REQUIRE(rest.Post("/openapi/v1/centers", {{"ai_center_id", "c2"}, {"name", "c2"}, {"region", "south"}}).http_status ==
          200);
  CHECK(jc::testing::WaitUntil([&] {
    return rest.Get("/scheduler/evaluate/score/c2?algorithmIds=least_load&algorithmScores=50").http_status == 200;
  }));

  server.Signal(SIGTERM);
  auto code = server.Wait(std::chrono::seconds(10));
  CHECK(code.has_value());
  if (code) CHECK(*code == 0);
  if (!code) server.Signal(SIGKILL);
  for (auto& t : registrations) t.join();
  CHECK(count(200) == 0);
  std::filesystem::remove_all(dir);
}
