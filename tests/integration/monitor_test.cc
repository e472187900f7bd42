// The monitor against real adapters (the SDK's example adapter, served over gRPC on
// loopback) and the whole control plane in one process, driven over REST (SPEC A3, A1).

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "services/monitor/monitor.h"
#include "services/southbound/adapter_client.h"
#include "tests/testing/event_chaos_proxy.h"
#include "tests/testing/local_adapter.h"
#include "tests/testing/process.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

// data.<key> of a REST reply, or `otherwise` while there is none (404, not polled yet).
template <typename T>
T Data(const json& body, const std::string& key, T otherwise) {
  const json& data = body.is_object() && body.contains("data") ? body["data"] : json();
  return data.is_object() ? data.value(key, otherwise) : otherwise;
}


// A center offering `cpus` CPUs at security grade 4.
struct Adapter : jc::testing::LocalAdapter {
  Adapter(const std::string& center, int cpus) : LocalAdapter(center, cpus, "security_grade: 4\n") {}
};

struct System : jc::testing::TestSystem {
  System()
      : TestSystem([](jc::server::AppOptions& o) {
          o.monitor.interval = absl::Milliseconds(100);
          o.monitor.call_timeout = absl::Milliseconds(500);
          o.registry.unknown_after = absl::Milliseconds(600);
          o.registry.unavailable_after = absl::Milliseconds(1200);
          o.health_sweep_interval = absl::Milliseconds(100);
        }) {}
  void Register(const std::string& id, const std::string& adapter) {
    json c = {{"ai_center_id", id}, {"name", id}, {"region", "north"}, {"adapter_address", adapter},
              {"capacity", {{"cpu", 8}}}};
    auto r = rest->Post("/openapi/v1/centers", c);
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
  }
  int Status(const std::string& id) { return Data(rest->Get("/openapi/v1/centers/" + id).body, "status", -1); }
};

TEST_CASE("the monitor polls every adapter: Table 4 usage by API and metrics, and centers come alive [A3][A1]",
          "[A3][A1]") {
  Adapter a("alpha", 6), b("beta", 3);
  System s;
  s.Register("alpha", a.address());
  s.Register("beta", b.address());
  s.Register("gamma", "127.0.0.1:1");  // nothing listens there

  // Every adapter has been asked once: alpha and beta answered, gamma's call failed.
  json usage;
  bool seen = jc::testing::WaitUntil([&] {
    usage = s.rest->Get("/openapi/v1/centers/alpha/usage").body;
    json beta = s.rest->Get("/openapi/v1/centers/beta/usage").body;
    json gamma = s.rest->Get("/openapi/v1/centers/gamma/usage").body;
    return Data(usage, "reachable", false) && Data(beta, "reachable", false) &&
           !Data(gamma, "last_error", std::string()).empty();
  });
  INFO(usage.dump());
  REQUIRE(seen);
  CHECK(usage["data"]["free"]["cpu"] == 6);
  CHECK(usage["data"]["security_grade"] == 4);
  CHECK(usage["data"].contains("observed_at"));
  // An answering adapter is the center's heartbeat.
  CHECK(jc::testing::WaitUntil([&] { return s.Status("alpha") == 1 && s.Status("beta") == 1; }));

  // A center whose adapter does not answer is listed unreachable with the reason, and
  // never comes alive.
  json gamma = s.rest->Get("/openapi/v1/centers/gamma/usage").body;
  CHECK(Data(gamma, "reachable", true) == false);
  CHECK_FALSE(Data(gamma, "last_error", std::string()).empty());
  CHECK(s.Status("gamma") != 1);

  auto all = s.rest->Get("/openapi/v1/usage").body["data"]["usage"];
  CHECK(all.size() == 3);

  std::string metrics = s.rest->Raw("/metrics");
  CHECK(metrics.find("jc_center_resource_free{center=\"alpha\",resource=\"cpu\"} 6") != std::string::npos);
  CHECK(metrics.find("jc_center_resource_free{center=\"beta\",resource=\"cpu\"} 3") != std::string::npos);
  CHECK(metrics.find("jc_center_adapter_reachable{center=\"gamma\"} 0") != std::string::npos);
  CHECK(metrics.find("jc_center_running_tasks{center=\"alpha\"} 0") != std::string::npos);

  SECTION("an adapter that stops answering makes its center unknown, then unavailable") {
    b.Stop();
    bool down = jc::testing::WaitUntil([&] { return s.Status("beta") == 0; });
    CHECK(down);
    CHECK(Data(s.rest->Get("/openapi/v1/centers/beta/usage").body, "reachable", true) == false);
    CHECK(s.Status("alpha") == 1);
  }
  SECTION("a center that leaves takes its usage and its metric series along") {
    // The monitor's series of the center, and only those: this month's utilisation gauges
    // (jc_center_utilisation_ratio, _offered_hours, _used_hours, _revenue) stay for a center
    // that offered capacity this month, by design (services/server/app.cc UtilisationGauges),
    // and appear once its offer has lasted long enough to count — on a loaded machine, before
    // the DELETE (this case failed about once in 25 runs under load while it looked for any
    // series of alpha).
    auto monitor_series_of_alpha = [](const std::string& metrics) {
      std::string found;
      for (const char* family : {"jc_center_running_tasks", "jc_center_waiting_tasks", "jc_center_resource_used",
                                 "jc_center_resource_free", "jc_center_security_grade", "jc_center_adapter_reachable"}) {
        const std::string series = std::string(family) + "{center=\"alpha\"";
        if (metrics.find("\n" + series) != std::string::npos) found += series + "} ";
      }
      return found;
    };
    REQUIRE_FALSE(monitor_series_of_alpha(s.rest->Raw("/metrics")).empty());  // there before it leaves
    REQUIRE(s.rest->Send("DELETE", "/openapi/v1/centers/alpha").http_status == 200);
    std::string left;
    bool gone = jc::testing::WaitUntil([&] {
      left = monitor_series_of_alpha(s.rest->Raw("/metrics"));
      return s.rest->Get("/openapi/v1/centers/alpha/usage").http_status == 404 && left.empty();
    });
    INFO("the monitor's series of alpha still there: " << left);
    CHECK(gone);
  }
}

TEST_CASE("usage of an unknown center is a clear 404 [A3][C5]", "[A3][C5]") {
  System s;
  auto r = s.rest->Get("/openapi/v1/centers/nowhere/usage");
  CHECK(r.http_status == 404);
  CHECK(r.body["errorMsg"].get<std::string>().find("nowhere") != std::string::npos);
}

}  // namespace

// Attacker's review, session 29 (F7): a center's queue report reached the scheduler's
// snapshot, REST and the monitor's log as it came. A rogue center (its adapter's answers
// rewritten by a proxy) sends thousands of entries, specs it does not offer, NaN, negative and
// absurd waits, duplicates and control characters; the monitor keeps what could be a report.
TEST_CASE("a rogue center's queue report is bounded where it enters: only specs it offers, each once, printable, a "
          "finite wait of at most 366 days, and an instant no timestamp holds is dropped [A16][A3][C6]",
          "[A16][A3][C6]") {
  jc::testing::LocalAdapter center("rogue", 4,
                                   "security_grade: 4\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n"
                                   "  - {id: cpu-2, cpu: 2, memory: 256Mi}\n");
  jc::testing::EventChaosProxy proxy(center.address(), 1, {0, 0});
  namespace apb = ::jointcloud::adapter::v1;
  auto estimate = [](const std::string& spec, double wait, const std::string& source = "rogue") {
    apb::SpecStartEstimate e;
    e.set_resource_spec_id(spec);
    e.set_wait_seconds(wait);
    e.set_source(source);
    return e;
  };
  std::vector<apb::SpecStartEstimate> forged;
  for (int i = 0; i < 5000; ++i) forged.push_back(estimate("junk-" + std::to_string(i), 1));
  forged.push_back(estimate("cpu-1", std::numeric_limits<double>::quiet_NaN()));
  forged.push_back(estimate("cpu-1", -5));
  forged.push_back(estimate("cpu-1", std::numeric_limits<double>::infinity()));
  forged.push_back(estimate("cpu-1\n[info] forged line", 10));
  forged.push_back(estimate("cpu-1", 120, "\x1b[2J" + std::string(500, 'a')));
  forged.push_back(estimate("cpu-1", 999));  // the spec again: its first stands
  forged.push_back(estimate("cpu-2", 1e300));
  forged.push_back(estimate("tpu-9", 5));
  forged.push_back(estimate(std::string(1000, 'c'), 5));
  proxy.ForgeStartEstimates(forged);
  google::protobuf::Timestamp never;  // past 9999-12-31: printed, it failed every usage list (helper-53)
  never.set_seconds(253402300800LL * 4);
  never.set_nanos(2'000'000'000);
  proxy.ForgeUsageAt(never);

  System s;
  s.Register("rogue", "127.0.0.1:" + std::to_string(proxy.port()));
  json usage;
  bool seen = jc::testing::WaitUntil([&] {
    usage = s.rest->Get("/openapi/v1/centers/rogue/usage").body;
    return usage.is_object() && usage.contains("data") && usage["data"].contains("start_estimates");
  });
  INFO(usage.dump().substr(0, 4000));
  REQUIRE(seen);
  const json& got = usage["data"]["start_estimates"];
  REQUIRE(got.size() == 2);
  CHECK(got[0]["resource_spec_id"] == "cpu-1");
  CHECK(got[0]["wait_seconds"].get<double>() == 120);
  const std::string source = got[0].value("source", "");
  CHECK(source.size() <= jc::monitor::kMaxSourceLength);
  CHECK(source.find('\x1b') == std::string::npos);
  CHECK(got[1]["resource_spec_id"] == "cpu-2");
  CHECK(got[1]["wait_seconds"].get<double>() == 366.0 * 86400);
  // Its instant is dropped: every center's usage still lists.
  CHECK_FALSE(usage["data"].contains("queue_reported_at"));
  auto all = s.rest->Get("/openapi/v1/usage");
  INFO(all.body.dump().substr(0, 2000));
  CHECK(all.http_status == 200);
}


// Issue 48: a group commit's events reach the control plane in one WatchBatches message; an
// adapter built before WatchBatches (the proxy answers it UNIMPLEMENTED) is read one event at a
// time. Both proxies stand in front of the same adapter, so they count what was asked.
TEST_CASE("the control plane watches a center's events in batches where its adapter serves WatchBatches, and one at a "
          "time from an adapter built before it, the same events either way [A14][A3]",
          "[A14][A3]") {
  namespace apb = ::jointcloud::adapter::v1;
  jc::testing::LocalAdapter center("batches", 4, "security_grade: 4\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n");
  jc::testing::EventChaosProxy newer(center.address(), 1, {0, 0});
  newer.ServeWatchBatches();
  jc::testing::EventChaosProxy older(center.address(), 1, {0, 0});
  auto client = jc::southbound::MakeGrpcAdapterClient();
  std::vector<apb::SubmitReplicaRequest> submits(3);
  for (size_t i = 0; i < submits.size(); ++i) {
    submits[i].mutable_key()->set_job_id("batched-" + std::to_string(i));
    submits[i].set_command("true");
    submits[i].set_resource_spec_id("cpu-1");
  }
  for (const auto& accepted : client->SubmitMany({"batches", center.address()}, submits)) {
    INFO(accepted.status().ToString());
    REQUIRE(accepted.ok());
  }
  // Every event until the three replicas ended, by cursor.
  auto watch = [&](const std::string& address) {
    std::vector<apb::ReplicaEvent> events;
    std::set<std::string> ended;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::Status s = client->Watch(
        {"batches", address}, 0,
        [&](const apb::ReplicaEvent& e) {
          events.push_back(e);
          if (e.replica().state() == apb::REPLICA_SUCCEEDED) ended.insert(e.replica().key().job_id());
        },
        [&] { return ended.size() == submits.size() || absl::Now() > deadline; });
    INFO(s.ToString());
    CHECK(absl::IsCancelled(s));
    CHECK(ended.size() == submits.size());
    return events;
  };
  auto batched = watch("127.0.0.1:" + std::to_string(newer.port()));
  CHECK(newer.watch_batches_calls() == 1);
  CHECK(newer.watch_calls() == 0);
  auto one_by_one = watch("127.0.0.1:" + std::to_string(older.port()));
  CHECK(older.watch_batches_calls() == 1);  // asked, answered UNIMPLEMENTED
  CHECK(older.watch_calls() == 1);
  REQUIRE(batched.size() >= 6);  // accepted, then ended, for each
  REQUIRE(one_by_one.size() >= batched.size());
  for (size_t i = 0; i < batched.size(); ++i) {
    if (i > 0) CHECK(batched[i].cursor() > batched[i - 1].cursor());
    CHECK(one_by_one[i].cursor() == batched[i].cursor());
    CHECK(one_by_one[i].replica().state() == batched[i].replica().state());
  }
  // Remembered: the older adapter is watched with Watch straight away the next time.
  (void)watch("127.0.0.1:" + std::to_string(older.port()));
  CHECK(older.watch_batches_calls() == 1);
  CHECK(older.watch_calls() == 2);
}

// Attacker's review of WatchBatches (helper-64, finding 1): a rogue center answers with one
// message of tens of thousands of empty events, a few bytes each, to have the control plane
// build and queue them all. Past 16,384 events a message the stream ends, none delivered.
TEST_CASE("a rogue center's WatchBatches message of 20,000 empty events ends the watch with RESOURCE_EXHAUSTED and "
          "delivers none of them [A14][C6]",
          "[A14][C6]") {
  namespace apb = ::jointcloud::adapter::v1;
  jc::testing::LocalAdapter center("rogue", 4, "security_grade: 4\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n");
  jc::testing::EventChaosProxy proxy(center.address(), 1, {0, 0});
  apb::ReplicaEvents flood;
  for (int i = 0; i < 20000; ++i) flood.add_events();
  proxy.ServeWatchBatches(flood);
  auto client = jc::southbound::MakeGrpcAdapterClient();
  int delivered = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Status s = client->Watch(
      {"rogue", "127.0.0.1:" + std::to_string(proxy.port())}, 0, [&](const apb::ReplicaEvent&) { ++delivered; },
      [&] { return absl::Now() > deadline; });
  INFO(s.ToString());
  CHECK(absl::IsResourceExhausted(s));
  CHECK(absl::StrContains(s.message(), "20000 events"));
  CHECK(delivered == 0);
  // A batch within the bound is read.
  apb::ReplicaEvents small;
  for (int i = 0; i < 100; ++i) small.add_events()->set_cursor(i + 1);
  proxy.ServeWatchBatches(small);
  absl::Status read = client->Watch(
      {"rogue", "127.0.0.1:" + std::to_string(proxy.port())}, 0, [&](const apb::ReplicaEvent&) { ++delivered; },
      [&] { return delivered == 100 || absl::Now() > deadline + absl::Seconds(30); });
  CHECK(absl::IsCancelled(read));
  CHECK(delivered == 100);
}
