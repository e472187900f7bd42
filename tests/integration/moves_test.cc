// Moves (SPEC A16, issue 45 Deliver 4) end to end, on real nexec centers behind the native
// adapter: a replica that waits at a center whose own users took its host is withdrawn
// there before it starts (nexec's kill only if pending) and placed at a center that can
// start it now; it runs once, its history, its MOVED event and the metrics say so. And the race the
// withdrawal must win or lose cleanly: a center starting the replica while the withdrawal
// is on its way — the replica is either withdrawn and never runs, or runs and stays.

#include <catch2/catch.hpp>
#include <algorithm>
#include <thread>

#include "adapters/sdk/adapter_core.h"
#include "tests/testing/nexec_center.h"
#include "tests/testing/sse_client.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

std::string Config(const std::string& center) {
  return "center_id: " + center + "\nsecurity_grade: 3\nspecs:\n  - {id: cpu-4, cpu: 4, memory: 256Mi}\n";
}

// The center's own users' work, holding its whole host until stopped.
std::string HoldHost(jc::testing::NexecCenter& center, const std::string& name) {
  auto local = center.Client();
  jc::adapter::ReplicaLaunch busy;
  busy.name = name;
  busy.command = "sleep 600";
  busy.spec.mutable_quantity()->set_cpu(4);
  busy.time_limit = absl::Hours(1);
  auto id = local->Submit(busy);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  std::string state;
  bool running = jc::testing::WaitUntil([&] {
    auto seen = local->Poll({*id});
    state = !seen.ok() ? seen.status().ToString() : seen->count(*id) ? seen->at(*id).message : "unknown";
    return seen.ok() && seen->count(*id) && seen->at(*id).state == jc::adapter::pb::REPLICA_RUNNING;
  });
  INFO(name << ": " << state);
  if (!running) {
    std::string log = center.master->Log();
    INFO(log.substr(log.size() > 6000 ? log.size() - 6000 : 0));
    std::string agent = center.agent->Log();
    INFO(agent.substr(agent.size() > 3000 ? agent.size() - 3000 : 0));
    REQUIRE(running);
  }
  return *id;
}

void Must(const jc::testing::RestReply& r) {
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
}

}  // namespace

TEST_CASE("a replica waiting at a center whose host its own users took moves to a center that can start it now: "
          "withdrawn before it started, run once, its history and the metrics say so [A16][A8]",
          "[A16][A8]") {
  jc::testing::NexecCenter slow("slow"), fast("fast");
  const std::string slow_address = slow.StartAdapter(Config("slow"));
  const std::string fast_address = fast.StartAdapter(Config("fast"));
  // The monitor polls when the test says (PollOnce): the control plane's view of the
  // centers is what it last polled, as between two polls of a real monitor.
  jc::testing::TestSystem s([](jc::server::AppOptions& o) {
    jc::testing::FastIntervals(o);
    o.monitor.interval = absl::Hours(1);
    o.jobs.move_after = absl::Seconds(1);
    o.jobs.walk_slice = 1;  // moves are weighed a job a turn of the loop, as at 25,000 jobs
  });
  for (const auto& [id, address] : {std::pair{"slow", slow_address}, std::pair{"fast", fast_address}}) {
    Must(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", id}, {"name", id}, {"region", "cn"},
                                              {"adapter_address", address},
                                              {"capacity", {{"cpu", 4}, {"memory", 8192}}}}));
  }
  Must(s.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-4"},
                                                  {"resource_spec_name", "4 CPUs"},
                                                  {"resource_quantity", {{"cpu", "4"}, {"memory", "256Mi"}}},
                                                  {"service_type", "batch"},
                                                  {"price", 1},
                                                  {"computing_center_list", "slow,fast"}}));
  const json job = {{"name", "mover"},
                    {"tasks", {{{"name", "t"}, {"command", "echo ran-once at $JC_CENTER_ID"}, {"resourceSpecId", "cpu-4"},
                                {"replicaNumber", 1}}}}};
  auto planned_at = [&](const std::string& center) {
    json plan = s.rest->Post("/openapi/v1/scheduler/plan", job).body;
    return plan.dump().find("\"placed\":true") != std::string::npos &&
           plan["data"]["replicas"][0].value("centerID", plan["data"]["replicas"][0].value("centerId", "")) == center;
  };

  // fast's host is taken by its own users; slow is free: the job goes to slow.
  const std::string fast_busy = HoldHost(fast, "fast-local");
  REQUIRE(s.app->monitor()->PollOnce().ok());
  REQUIRE(jc::testing::WaitUntil([&] { return planned_at("slow"); }));
  // Then slow's own users take its host, before the monitor's next poll: the control
  // plane still sees slow free and places the job there, where it waits.
  const std::string slow_busy = HoldHost(slow, "slow-local");
  auto created = s.rest->Post("/openapi/v1/trainjob", job);
  INFO(created.body.dump());
  REQUIRE(created.http_status == 200);
  const std::string id = created.body["data"]["jobId"];
  json got;
  REQUIRE(jc::testing::WaitUntil([&] {
    got = s.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
    return got.dump().find("\"slow\"") != std::string::npos && got.value("status", "") == "pending" &&
           got.contains("history") && got["history"][0].value("centerID", "") == "slow";
  }));

  // fast frees; the next poll says so, and that slow is full with an hour's work queued.
  REQUIRE(fast.Client()->Stop(fast_busy).ok());
  bool moved = jc::testing::WaitUntil([&] {
    (void)s.app->monitor()->PollOnce();
    got = s.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
    return got.value("status", "") == "completed";
  }, std::chrono::seconds(60));
  INFO(got.dump(2));
  REQUIRE(moved);

  // Its history: attempt 0 at slow withdrawn (never started), attempt 1 at fast ran.
  REQUIRE(got["history"].size() == 2);
  const json& left = got["history"][0];
  const json& ran = got["history"][1];
  CHECK(left.value("centerID", "") == "slow");
  CHECK(left.value("outcome", "") == "withdrawn");
  CHECK_FALSE(left.contains("startedAt"));
  CHECK(left.value("message", "").find("moving it to fast") != std::string::npos);
  CHECK(ran.value("centerID", "") == "fast");
  CHECK(ran.value("outcome", "") == "succeeded");
  CHECK(ran.contains("startedAt"));
  // Exactly one run: its output once, at fast; nexec at slow has the job killed while
  // pending, never started.
  auto log = s.rest->Raw("/openapi/v1/trainjob/" + id + "/task/0/replica/0/log/content");
  CHECK(log == "ran-once at fast\n");  // JC_CENTER_ID: the center that ran it
  std::string metrics = s.rest->Raw("/metrics");
  CHECK(metrics.find("jc_replica_withdrawals_total{center=\"slow\",result=\"withdrawn\"} 1") != std::string::npos);
  // The move by where it went: counted once, from slow to fast.
  CHECK(metrics.find("jc_replica_moves_total{from=\"slow\",to=\"fast\"} 1") != std::string::npos);
  // Its story as watchers read it: the move is an event of its own (from, to, which
  // replica, why), after the update that placed it at fast, and before it ended.
  jc::testing::SseReply story = jc::testing::ReadSse(
      s.app->rest_port(), s.admin_token, "/openapi/v1/trainjob/" + id + "/events?history=true&heartbeatSeconds=0", "",
      [](const std::vector<jc::testing::SseEvent>& events) {
        return std::any_of(events.begin(), events.end(), [](const auto& e) { return e.type == "ended"; });
      },
      std::chrono::seconds(20));
  REQUIRE(story.http_status == 200);
  std::vector<json> moves;
  size_t moved_at = 0, placed_at_fast = 0, ended_at = 0;
  for (size_t i = 0; i < story.events.size(); ++i) {
    const auto& e = story.events[i];
    INFO(e.type << " " << e.data.dump());
    if (e.type == "moved") {
      CHECK(e.data.value("type", "") == "MOVED");
      moves.push_back(e.data);
      moved_at = i;
    }
    if (e.type == "updated" && placed_at_fast == 0 && e.data.dump().find("\"centerID\":\"fast\"") != std::string::npos) {
      placed_at_fast = i;
    }
    if (e.type == "ended") ended_at = i;
  }
  REQUIRE(moves.size() == 1);
  const json& move = moves[0]["move"];
  INFO(moves[0].dump());
  CHECK(move.value("fromCenterID", "") == "slow");
  CHECK(move.value("toCenterID", "") == "fast");
  CHECK(move.value("taskIndex", 0) == 0);
  CHECK(move.value("replicaIndex", 0) == 0);
  CHECK(move.value("attempt", 0) == 1);
  CHECK(move.value("reason", "").find("moving it to fast") != std::string::npos);
  CHECK(placed_at_fast > 0);
  CHECK(moved_at > placed_at_fast);
  CHECK(ended_at > moved_at);
  REQUIRE(slow.Client()->Stop(slow_busy).ok());
}

TEST_CASE("a center starting a replica while its withdrawal is on the way: it is either withdrawn and never runs, "
          "or runs and stays, never both [A16][A14]",
          "[A16][A14]") {
  jc::testing::NexecCenter center("race");
  center.StartAdapter(Config("race"));
  jc::adapter::AdapterCore* core = &center.adapter->core();
  int withdrawn = 0, started = 0;
  for (int round = 0; round < 6; ++round) {
    INFO("round " << round);
    const std::string busy = HoldHost(center, "race-local-" + std::to_string(round));
    jc::adapter::pb::SubmitReplicaRequest req;
    req.mutable_key()->set_job_id("race-job-" + std::to_string(round));
    req.mutable_key()->set_origin("test");
    req.set_command("echo started > " + (center.dir / ("ran-" + std::to_string(round))).string());
    req.set_resource_spec_id("cpu-4");
    auto submitted = core->Submit(req);
    INFO(submitted.status().ToString());
    REQUIRE(submitted.ok());
    REQUIRE(submitted->state() == jc::adapter::pb::REPLICA_PENDING);
    // Free the host and withdraw at once: nexec may start the replica first.
    std::thread frees([&] { (void)center.Client()->Stop(busy); });
    if (round % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20 * round));  // vary who wins
    auto answer = core->WithdrawReplica(req.key());
    frees.join();
    INFO(answer.status().ToString());
    REQUIRE(answer.ok());
    jc::adapter::pb::Replica last;
    REQUIRE(jc::testing::WaitUntil([&] {
      (void)core->PollOnce();
      auto r = core->Get(req.key());
      if (!r.ok()) return false;
      last = *r;
      return last.state() == jc::adapter::pb::REPLICA_SUCCEEDED || last.state() == jc::adapter::pb::REPLICA_STOPPED ||
             last.state() == jc::adapter::pb::REPLICA_FAILED;
    }));
    // Give a replica that was wrongly both a chance to write its file: the host is free.
    const bool ran = std::filesystem::exists(center.dir / ("ran-" + std::to_string(round)));
    INFO("round " << round << ": " << last.DebugString());
    if (answer->withdrawn()) {
      ++withdrawn;
      CHECK(last.withdrawn());
      CHECK_FALSE(last.has_started_at());
      CHECK_FALSE(ran);
    } else {
      ++started;
      CHECK_FALSE(last.withdrawn());
      CHECK(last.state() == jc::adapter::pb::REPLICA_SUCCEEDED);
      CHECK(ran);
    }
  }
  // Both outcomes are legitimate; the counts say which the runs exercised.
  WARN("withdrawn " << withdrawn << ", started first " << started);
  CHECK(withdrawn + started == 6);
}
