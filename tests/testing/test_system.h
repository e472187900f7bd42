#pragma once

// The whole control plane in one process (as `jointcloud --services=all` runs it) on free
// loopback ports, over the test store, with a REST client. Tests that link jc_app use it.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>

#include "services/server/app.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/test_store.h"

namespace jc::testing {

// Intervals short enough for a test to follow a job in a second or two: the monitor polls,
// the scheduler rereads its inputs, the job manager cycles and polls.
inline void FastIntervals(jc::server::AppOptions& o) {
  o.monitor.interval = absl::Milliseconds(100);
  o.scheduler_refresh = absl::Milliseconds(50);
  o.jobs.cycle_interval = absl::Milliseconds(50);
  o.jobs.poll_interval = absl::Milliseconds(500);
}

// Where two control planes, one after the other or side by side, find one store: a file for
// SQLite, a schema of its own (`name`) for PostgreSQL. Replaces the suite's own store.
inline void ShareStore(jc::server::AppOptions& o, const std::string& name) {
  o.store = nullptr;
  if (TestStoreBackend() == "sqlite") {
    o.store_uri = "sqlite://" + (std::filesystem::temp_directory_path() / (name + ".db")).string();
  } else {
    o.store_uri = std::getenv("JC_TEST_PG_URI");
    o.store_schema = name;
  }
}

struct TestSystem {
  std::unique_ptr<jc::server::App> app;
  std::unique_ptr<RestClient> rest;  // as the federation admin
  std::string admin_token;

  // `customize` may change the options (intervals, services) before the start.
  explicit TestSystem(const std::function<void(jc::server::AppOptions&)>& customize = {}) {
    jc::server::AppOptions o;
    o.services = *jc::server::ParseServices("all");
    o.grpc_address = "127.0.0.1:0";
    o.rest_port = 0;
    o.store = MakeTestStore();
    o.gateway.worker_threads = 4;
    if (customize) customize(o);
    auto started = jc::server::App::Start(std::move(o));
    INFO(started.status().ToString());
    REQUIRE(started.ok());
    app = std::move(started).value();
    if (app->identities() != nullptr) {
      auto token = app->identities()->BootstrapAdmin("admin");
      INFO(token.status().ToString());
      REQUIRE(token.ok());
      if (token->has_value()) {
        admin_token = **token;
      } else {  // a second instance on a shared store: another token of the same admin
        jointcloud::v1::CreateTokenRequest req;
        req.set_user_name("admin");
        auto more = app->identities()->CreateToken(req);
        INFO(more.status().ToString());
        REQUIRE(more.ok());
        admin_token = more->secret();
      }
    }
    rest = std::make_unique<RestClient>(app->rest_port(), admin_token);
  }

  // A user with `role` ("VIEWER", "MEMBER", "OWNER") in `project` (both created as
  // needed) and a REST client with its own token.
  std::unique_ptr<RestClient> UserClient(const std::string& user, const std::string& project,
                                         const std::string& role) {
    rest->Post("/openapi/v1/projects", {{"name", project}});
    auto created = rest->Post("/openapi/v1/users", {{"name", user}});
    INFO(created.body.dump());
    REQUIRE((created.http_status == 200 || created.http_status == 409));
    auto member = rest->Send("PUT", "/openapi/v1/users/" + user + "/projects/" + project,
                             nlohmann::json{{"role", role}}.dump());
    INFO(member.body.dump());
    REQUIRE(member.http_status == 200);
    auto token = rest->Post("/openapi/v1/tokens", {{"user_name", user}});
    INFO(token.body.dump());
    REQUIRE(token.http_status == 200);
    return std::make_unique<RestClient>(app->rest_port(), token.body["data"]["secret"].get<std::string>());
  }
};

}  // namespace jc::testing
