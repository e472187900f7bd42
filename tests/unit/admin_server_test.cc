// The admin endpoints' server (/metrics, /healthz, /readyz) of every daemon: started, it
// answers; stopped at once after starting, it stops (cpp-httplib ignores a stop that comes
// before its thread runs, and that thread then waits in accept for ever: a CI run hung on
// an adapter stopped right after it started).

#include <httplib.h>
#include <prometheus/registry.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include <catch2/catch.hpp>

#include "common/admin_server.h"

TEST_CASE("an admin server stopped right after it started stops, every time, and one left running answers "
          "/healthz",
          "[C8]") {
  auto registry = std::make_shared<prometheus::Registry>();
  // Each round on a thread of its own, so a hang fails the test instead of hanging it.
  for (int round = 0; round < 500; ++round) {
    auto stopped = std::make_shared<std::promise<bool>>();
    std::future<bool> done = stopped->get_future();
    std::thread([registry, stopped] {
      jc::AdminServer server(registry, nullptr);
      const bool started = server.Start("127.0.0.1:0").ok();
      server.Stop();
      stopped->set_value(started);
    }).detach();  // a hung one is left behind: the failure below says so
    INFO("round " << round);
    REQUIRE(done.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
    CHECK(done.get());
  }
  jc::AdminServer server(registry, nullptr);
  auto port = server.Start("127.0.0.1:0");
  REQUIRE(port.ok());
  httplib::Client client("127.0.0.1", *port);
  auto healthz = client.Get("/healthz");
  REQUIRE(healthz);
  CHECK(healthz->status == 200);
}
