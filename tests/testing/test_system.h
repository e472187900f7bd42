#pragma once

// The whole control plane in one process (as `jointcloud --services=all` runs it) on free
// loopback ports, over the test store, with a REST client. Tests that link jc_app use it.

#include <catch2/catch.hpp>
#include <functional>
#include <memory>

#include "services/server/app.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/test_store.h"

namespace jc::testing {

struct TestSystem {
  std::unique_ptr<jc::server::App> app;
  std::unique_ptr<RestClient> rest;

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
    rest = std::make_unique<RestClient>(app->rest_port());
  }
};

}  // namespace jc::testing
