// Adapters report what their scheduler knows of its queue (SPEC A16, issue 45 Deliver 3): a
// native center (a real nexec master and agent on loopback, behind the native adapter)
// whose host is busy says how long a replica of each spec would wait, and the monitor
// carries it to REST and into the scheduler's snapshot.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "executor/auth/munge_auth.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "tests/testing/nexec_center.h"
#include "tests/testing/test_account.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

double WaitOf(const json& usage, const std::string& spec, double otherwise) {
  const json& data = usage.is_object() && usage.contains("data") ? usage["data"] : json();
  if (!data.is_object() || !data.contains("start_estimates")) return otherwise;
  for (const json& e : data["start_estimates"]) {
    if (e.value("resource_spec_id", "") == spec) return e.value("wait_seconds", 0.0);
  }
  return otherwise;
}

}  // namespace

TEST_CASE("a native center with a busy host reports how long a replica of each spec would wait, and the monitor "
          "and the scheduler's snapshot show it [A16][A3]",
          "[A16][A3]") {
  jc::testing::NexecCenter center("busy");
  // The center's own work (not the federation's) holds every CPU for up to an hour.
  jc::adapter::NexecBackend local(center.address, "", jc::nexec::MungeAuth::Munge(""));
  jc::adapter::ReplicaLaunch busy;
  busy.name = "local-busy";
  busy.command = "sleep 600";
  busy.spec.mutable_quantity()->set_cpu(4);
  busy.time_limit = absl::Hours(1);
  auto busy_id = local.Submit(busy);
  INFO(busy_id.status().ToString());
  REQUIRE(busy_id.ok());
  REQUIRE(jc::testing::WaitUntil([&] {
    auto seen = local.Poll({*busy_id});
    return seen.ok() && seen->count(*busy_id) && seen->at(*busy_id).state == jc::adapter::pb::REPLICA_RUNNING;
  }));

  // The native adapter over it, offering a spec that fits once the host frees and one
  // that never fits (its wait is unknown: absent, never zero).
  std::string adapter_address = center.StartAdapter(
      "center_id: busy\nsecurity_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n"
      "  - {id: cpu-64, cpu: 64, memory: 256Mi}\n");

  jc::testing::TestSystem s([](jc::server::AppOptions& opts) {
    opts.monitor.interval = absl::Milliseconds(100);
    opts.scheduler_refresh = absl::Milliseconds(50);
  });
  auto must = [](const jc::testing::RestReply& r) {
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
  };
  must(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "busy"}, {"name", "busy"}, {"region", "cn"},
                                            {"adapter_address", adapter_address},
                                            {"capacity", {{"cpu", 4}, {"memory", 8192}}}}));
  must(s.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                  {"resource_spec_name", "1 CPU"},
                                                  {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                  {"service_type", "batch"},
                                                  {"price", 1},
                                                  {"computing_center_list", "busy"}}));

  // Monitor REST: the wait nexec's backfill planner gives, the busy job's hour less what
  // it has run.
  json usage;
  bool reported = jc::testing::WaitUntil([&] {
    usage = s.rest->Get("/openapi/v1/centers/busy/usage").body;
    return WaitOf(usage, "cpu-1", -1) > 0;
  });
  INFO(usage.dump());
  REQUIRE(reported);
  CHECK(WaitOf(usage, "cpu-1", -1) > 3000);
  CHECK(WaitOf(usage, "cpu-1", -1) <= 3600);
  CHECK(WaitOf(usage, "cpu-64", -1) == -1);  // never fits: unknown
  for (const json& e : usage["data"]["start_estimates"]) CHECK(e.value("source", "") == "nexec backfill");
  CHECK(usage["data"].contains("queue_reported_at"));
  CHECK(usage["data"].value("waiting_task_num", 0) == 0);  // a wait with an empty queue: the host is busy

  // The scheduler's snapshot holds it by spec, with when the monitor polled it.
  std::optional<jc::scheduler::Scheduler::QueueReport> queue;
  bool in_snapshot = jc::testing::WaitUntil([&] {
    queue = s.app->scheduler()->ReportedQueue("busy");
    return queue && queue->start_delay.count("cpu-1") && queue->start_delay.at("cpu-1") > absl::Minutes(50);
  });
  REQUIRE(in_snapshot);
  CHECK(queue->reported_at != absl::InfinitePast());
  CHECK(queue->reported_at <= absl::Now());
  CHECK_FALSE(queue->start_delay.count("cpu-64"));

  // The host frees: a replica would start at once, and both say so.
  REQUIRE(local.Stop(*busy_id).ok());
  bool freed = jc::testing::WaitUntil([&] {
    usage = s.rest->Get("/openapi/v1/centers/busy/usage").body;
    queue = s.app->scheduler()->ReportedQueue("busy");
    return WaitOf(usage, "cpu-1", -1) == 0 && queue && queue->start_delay.count("cpu-1") &&
           queue->start_delay.at("cpu-1") == absl::ZeroDuration();
  });
  INFO(usage.dump());
  CHECK(freed);
}

namespace {

// A munge credential for `payload` made by `user` (munge's own CLI, run as that account).
std::string CredentialOf(const std::string& user, const std::string& payload, const std::filesystem::path& dir) {
  static int made = 0;
  const std::string out = (dir / ("cred-" + user + "-" + std::to_string(made++))).string();
  jc::testing::Process p({"/usr/sbin/runuser", "-u", user, "--", "/usr/bin/munge",
                          "--socket=" + jc::testing::UsePrivateMunged(), "--string=" + payload},
                         out);
  REQUIRE(p.Wait() == 0);
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  std::string cred = text.str();
  while (!cred.empty() && std::isspace(static_cast<unsigned char>(cred.back()))) cred.pop_back();
  return cred;
}

}  // namespace

// Attacker's review, session 29 (F4): EstimateStart probes only as the caller or an account
// the caller may submit for, as Submit does; a probe as another account would read that
// account's limits and usage from the reasons. Tried as an unprivileged local account, with
// its own munge credential, against a real master.
TEST_CASE("an unprivileged local account's start probe is answered for itself only: probing as another account or "
          "root is refused [A16][B9][C6]",
          "[A16][B9][C6]") {
  if (geteuid() != 0) {
    WARN("not run: creating the unprivileged test accounts needs root (CI runs as root)");
    return;
  }
  jc::testing::NexecCenter center("probe");
  jc::testing::TestAccount mallory("jc-probe-m"), victim("jc-probe-v");
  auto master = ::nexec::v1::Master::NewStub(grpc::CreateChannel(center.address, grpc::InsecureChannelCredentials()));
  auto probe_as = [&](const std::string& probe_user, ::nexec::v1::EstimateStartResponse* resp) {
    ::nexec::v1::EstimateStartRequest req;
    ::nexec::v1::JobSpec* probe = req.add_probes();
    probe->set_user(probe_user);
    probe->set_slots(1);
    grpc::ClientContext ctx;
    ctx.AddMetadata(jc::nexec::kMungeMetadataKey,
                    CredentialOf(mallory.name, jc::nexec::MungeAuth::Payload("EstimateStart", req), center.dir));
    return master->EstimateStart(&ctx, req, resp);
  };
  for (const std::string& other : {victim.name, std::string("root")}) {
    ::nexec::v1::EstimateStartResponse resp;
    grpc::Status s = probe_as(other, &resp);
    INFO(other << ": " << s.error_message());
    CHECK(s.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(s.error_message().find("may not submit jobs as " + other) != std::string::npos);
    CHECK(resp.estimates_size() == 0);
  }
  // As itself (named, or no user: the caller's): answered.
  for (const std::string& self : {mallory.name, std::string()}) {
    ::nexec::v1::EstimateStartResponse resp;
    grpc::Status s = probe_as(self, &resp);
    INFO("'" << self << "': " << s.error_message());
    REQUIRE(s.ok());
    REQUIRE(resp.estimates_size() == 1);
    CHECK(resp.estimates(0).known());
  }
}

