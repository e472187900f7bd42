// Job kinds end to end (SPEC A17, issue 46 item 1): a service runs until stopped, started
// again after a back-off each time its replica ends; an interactive job runs until it exits
// or is stopped; each kind runs only on specs offering its service type (Table 3). A real
// control plane over REST, a real local center running real processes.

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include <unistd.h>

#include "absl/time/time.h"
#include "tests/testing/local_adapter.h"
#include "tests/testing/process.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

constexpr char kCenterConfig[] =
    "security_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n  - {id: svc-1, cpu: 1, memory: 256Mi}\n"
    "  - {id: nb-1, cpu: 1, memory: 256Mi}\n";

// One center of 4 CPUs offering cpu-1 (batch), svc-1 (batch and streaming) and nb-1
// (interactive).
struct Kinds : jc::testing::TestSystem {
  std::unique_ptr<jc::testing::LocalAdapter> own;
  jc::testing::LocalAdapter* solo;

  // `center`: a center that outlives this control plane, registered already in its store
  // (a restart); none: a center of its own, registered here.
  explicit Kinds(const std::function<void(jc::server::AppOptions&)>& more = {},
                 jc::testing::LocalAdapter* center = nullptr)
      : TestSystem([&](jc::server::AppOptions& o) {
          jc::testing::FastIntervals(o);
          if (more) more(o);
        }),
        own(center ? nullptr : std::make_unique<jc::testing::LocalAdapter>("solo", 4, kCenterConfig)),
        solo(center ? center : own.get()) {
    if (center == nullptr) Register();
  }
  void Register() {
    Must(rest->Post("/openapi/v1/centers", {{"ai_center_id", "solo"}, {"name", "solo"}, {"region", "cn"},
                                            {"network_topology", "cn/solo"}, {"adapter_address", solo->address()},
                                            {"capacity", {{"cpu", 4}, {"memory", 8192}}}}));
    for (const auto& [id, type] : {std::pair<const char*, const char*>{"cpu-1", "batch"},
                                   {"svc-1", "batch,streaming"}, {"nb-1", "interactive"}}) {
      Must(rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", id},
                                                    {"resource_spec_name", id},
                                                    {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                    {"service_type", type},
                                                    {"price", 1},
                                                    {"computing_center_list", "solo"}}));
    }
    REQUIRE(jc::testing::WaitUntil([&] {
      return rest->Post("/openapi/v1/scheduler/plan", Job("ready", "true", "cpu-1", "")).body.dump().find(
                 "\"placed\":true") != std::string::npos;
    }));
  }
  static void Must(const jc::testing::RestReply& r) {
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
  }
  // A job of one task, no replicaNumber (one replica).
  static json Job(const std::string& name, const std::string& command, const std::string& spec,
                  const std::string& kind) {
    json task = {{"name", "t"}, {"command", command}, {"resourceSpecId", spec}};
    if (!kind.empty()) task["kind"] = kind;
    return {{"name", name}, {"tasks", json::array({task})}};
  }
  std::string Submit(const json& job) {
    auto r = rest->Post("/openapi/v1/trainjob", job);
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
    return r.body["data"]["jobId"];
  }
  json Get(const std::string& id) { return rest->Get("/openapi/v1/trainjob/" + id).body["data"]; }
  json WaitFor(const std::string& id, const std::function<bool(const json&)>& done) {
    json job;
    bool reached = jc::testing::WaitUntil([&] {
      job = Get(id);
      return done(job);
    });
    INFO(job.dump());
    REQUIRE(reached);
    return job;
  }
};

// The attempt `n` of the job's one replica in its history, or null.
json Attempt(const json& job, int n) {
  for (const auto& a : job.value("history", json::array())) {
    if (a.value("attempt", 0) == n) return a;
  }
  return nullptr;
}

double Seconds(const json& timestamp) {
  absl::Time t;
  std::string error;
  REQUIRE(absl::ParseTime(absl::RFC3339_full, timestamp.get<std::string>(), &t, &error));
  return absl::ToUnixMillis(t) / 1000.0;
}

}  // namespace

TEST_CASE("a service runs until stopped: a replica that exits starts again after its back-off as a new attempt, and "
          "stopping the service ends it completed [A17]",
          "[A17]") {
  Kinds k;
  const std::string id = k.Submit(Kinds::Job("web", "sleep 0.3", "svc-1", "service"));
  // It exits 0 after 0.3 s, which ends a batch job; a service's replica starts again, 5 s
  // after it ended (the first back-off), as attempt 1.
  json job = k.WaitFor(id, [](const json& j) {
    const json second = Attempt(j, 1);
    return second.is_object() && second.contains("startedAt");
  });
  CHECK(job["taskInfos"][0]["kind"] == "service");
  CHECK(job["taskInfos"][0]["replicaNumber"] == 1);
  const json first = Attempt(job, 0);
  REQUIRE(first.contains("endedAt"));
  CHECK(Seconds(Attempt(job, 1)["placedAt"]) - Seconds(first["endedAt"]) >= 4.5);
  CHECK(job["status"] != "completed");
  // Stopped by its user, it ends as meant: completed, and nothing of it runs on.
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()));
  job = k.WaitFor(id, [](const json& j) { return j.value("status", "") == "completed"; });
  CHECK(job["statusReason"] == "stopped by the user (a service job ends when stopped)");
}

TEST_CASE("an interactive job runs until it exits or is stopped, and stopped it ends completed [A17]", "[A17]") {
  Kinds k;
  const std::string id = k.Submit(Kinds::Job("notebook", "sleep 60", "nb-1", "interactive"));
  k.WaitFor(id, [](const json& j) { return j.value("status", "") == "running"; });
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()));
  json job = k.WaitFor(id, [](const json& j) { return j.value("status", "") == "completed"; });
  CHECK(job["statusReason"] == "stopped by the user (an interactive job ends when stopped)");
  CHECK(job["taskInfos"][0]["kind"] == "interactive");
  // One that exits ends as a batch job would.
  const std::string done = k.Submit(Kinds::Job("quick", "true", "nb-1", "interactive"));
  job = k.WaitFor(done, [](const json& j) { return j.value("status", "") == "completed"; });
  CHECK(job["statusReason"] == "every replica succeeded");
}

TEST_CASE("a kind runs only on a spec offering its service type, and bad kinds and counts are refused with the field "
          "named, writing nothing [A17][C5]",
          "[A17][C5]") {
  Kinds k;
  const size_t before = k.rest->Get("/openapi/v1/trainjob").body.dump().size();
  struct Case {
    json job;
    std::string says;
  };
  json zero = Kinds::Job("zero", "true", "svc-1", "service");
  zero["tasks"][0]["replicaNumber"] = 0;
  json limited = Kinds::Job("limited", "sleep 9", "svc-1", "service");
  limited["timeLimit"] = "60s";
  json pair = Kinds::Job("pair", "sleep 9", "nb-1", "interactive");
  pair["tasks"][0]["replicaNumber"] = 2;
  for (const Case& c : std::vector<Case>{
           {Kinds::Job("nb", "sleep 9", "cpu-1", "interactive"),
            "tasks[0].resourceSpecId: an interactive task needs a resource spec offering service_type interactive; "
            "spec \"cpu-1\" offers batch"},
           {Kinds::Job("svc", "sleep 9", "cpu-1", "service"),
            "tasks[0].resourceSpecId: a service task needs a resource spec offering service_type streaming; spec "
            "\"cpu-1\" offers batch"},
           {Kinds::Job("odd", "true", "svc-1", "daemon"),
            "tasks[0].kind: must be one of batch, interactive, service, streaming, got \"daemon\""},
           {zero, "tasks[0].replicaNumber: must be 1 to 1000, got 0"},
           {limited, "timeLimit: a service job runs until stopped; it takes no time limit"},
           {pair, "tasks[0].replicaNumber: an interactive job has one replica, got 2"}}) {
    INFO(c.job.dump());
    auto r = k.rest->Post("/openapi/v1/trainjob", c.job);
    CHECK(r.http_status == 400);
    CHECK(r.body.value("errorMsg", "").find(c.says) != std::string::npos);
    INFO(r.body.dump());
    // A plan says the same.
    auto plan = k.rest->Post("/openapi/v1/scheduler/plan", c.job);
    CHECK(plan.http_status == 400);
    CHECK(plan.body.value("errorMsg", "").find(c.says) != std::string::npos);
  }
  CHECK(k.rest->Get("/openapi/v1/trainjob").body.dump().size() == before);
  // A batch job runs on any spec, as every job did before kinds.
  const std::string batch = k.Submit(Kinds::Job("batch", "true", "nb-1", ""));
  k.WaitFor(batch, [](const json& j) { return j.value("status", "") == "completed"; });
}

// Attacker's review, session 33: a service's replicas restart at different times; with one
// still backing off and the other placed, the job left the queue and the second never came
// back (the pass placed "everything due").
TEST_CASE("every replica of a service comes back, however their restarts interleave [A17]", "[A17]") {
  Kinds k;
  // The first attempt of each replica ends (replica 0 at once, replica 1 two seconds
  // later); the next ones stay up. Each starts again 5 s after its end.
  json two = Kinds::Job("pair", "[ \"$JC_ATTEMPT\" -ge 1 ] && exec sleep 60; sleep $((JC_REPLICA_INDEX * 2))", "svc-1",
                        "service");
  two["tasks"][0]["replicaNumber"] = 2;
  const std::string id = k.Submit(two);
  json job = k.WaitFor(id, [](const json& j) {
    int restarted = 0;
    for (const auto& a : j.value("history", json::array())) {
      if (a.value("attempt", 0) >= 1 && a.contains("startedAt")) ++restarted;
    }
    return restarted >= 2;
  });
  std::set<int> replicas;
  for (const auto& a : job["history"]) {
    if (a.value("attempt", 0) >= 1 && a.contains("startedAt")) replicas.insert(a.value("replicaIndex", 0));
  }
  CHECK(replicas == std::set<int>{0, 1});
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()));
  k.WaitFor(id, [](const json& j) { return j.value("status", "") == "completed"; });
}

// A control plane restarted while a service's replica waits out its back-off: the back-off is
// in the record, so the next one keeps it, and the replica starts again once, as attempt 1.
TEST_CASE("a service's back-off outlives a restart of the control plane: its replica starts again once, after the "
          "back-off [A17][C7]",
          "[A17][C7]") {
  const std::string name = "jc_kinds_" + std::to_string(getpid());
  std::filesystem::remove(std::filesystem::temp_directory_path() / (name + ".db"));
  auto shared = [&](jc::server::AppOptions& o) {
    jc::testing::ShareStore(o, name);
    o.jobs.instance_id = "one";  // the same instance again after the restart: its lease at once
  };
  jc::testing::LocalAdapter center("solo", 4, kCenterConfig);
  std::string id;
  json first;
  {
    Kinds k(shared, &center);
    k.Register();
    id = k.Submit(Kinds::Job("web", "[ \"$JC_ATTEMPT\" -ge 1 ] && exec sleep 60; true", "svc-1", "service"));
    json job = k.WaitFor(id, [](const json& j) { return Attempt(j, 0).is_object() && Attempt(j, 0).contains("endedAt"); });
    first = Attempt(job, 0);
    k.app->Shutdown();
  }
  Kinds again(shared, &center);  // its center and specs are in the store
  json job = again.WaitFor(id, [](const json& j) {
    const json second = Attempt(j, 1);
    return second.is_object() && second.contains("startedAt");
  });
  CHECK(Seconds(Attempt(job, 1)["placedAt"]) - Seconds(first["endedAt"]) >= 4.5);
  CHECK(job["history"].size() == 2);  // attempts 0 and 1, nothing started twice
  Kinds::Must(again.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()));
  again.WaitFor(id, [](const json& j) { return j.value("status", "") == "completed"; });
  again.app->Shutdown();
  std::filesystem::remove(std::filesystem::temp_directory_path() / (name + ".db"));
}
