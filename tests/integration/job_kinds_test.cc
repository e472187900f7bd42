// Job kinds end to end (SPEC A17, issue 46 item 1): a service runs until stopped, started
// again after a back-off each time its replica ends; an interactive job runs until it exits
// or is stopped; each kind runs only on specs offering its service type (Table 3). A real
// control plane over REST, a real local center running real processes.

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <thread>

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "tests/testing/local_adapter.h"
#include "tests/testing/process.h"
#include "tests/testing/tcp_proxy.h"
#include "services/southbound/adapter_client.h"
#include "tests/testing/event_chaos_proxy.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

// Four specs, and 40 ports of this process's own (suites run side by side).
std::string CenterConfig() {
  const int first = 28000 + static_cast<int>(getpid() % 40) * 40;  // below the ephemeral ports (conformance.cc)
  return "security_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n  - {id: svc-1, cpu: 1, memory: 256Mi}\n"
         "  - {id: nb-1, cpu: 1, memory: 256Mi}\n  - {id: svc-3, cpu: 1, memory: 256Mi}\nports: {first: " +
         std::to_string(first) + ", last: " + std::to_string(first + 39) + "}\n";
}

// One center of 4 CPUs offering cpu-1 (batch), svc-1 (batch and streaming) and nb-1
// (interactive), and svc-3, which a test registers.
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
        own(center ? nullptr : std::make_unique<jc::testing::LocalAdapter>("solo", 4, CenterConfig())),
        solo(center ? center : own.get()) {
    if (center == nullptr) Register();
  }
  // `address`: where the control plane reaches the center (a proxy before it); empty: its own.
  void Register(const std::string& address = "") {
    Must(rest->Post("/openapi/v1/centers", {{"ai_center_id", "solo"}, {"name", "solo"}, {"region", "cn"},
                                            {"network_topology", "cn/solo"},
                                            {"adapter_address", address.empty() ? solo->address() : address},
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
  const size_t before = k.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size();
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
  CHECK(k.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size() == before);
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
  jc::testing::LocalAdapter center("solo", 4, CenterConfig());
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

namespace {

// The replica indexes of the job's task 0 whose status is `status`, by its taskInfos.
std::set<int> Replicas(const json& job, const std::string& status) {
  std::set<int> out;
  const json& statuses = job["taskInfos"][0].value("replicaStatus", json::array());
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i] == status) out.insert(static_cast<int>(i));
  }
  return out;
}

}  // namespace

TEST_CASE("a running service scales: more replicas start, fewer stop the highest-numbered (their runs closed and "
          "kept in the history), and the job runs on [A17]",
          "[A17]") {
  Kinds k;
  json two = Kinds::Job("web", "exec sleep 120", "svc-1", "service");
  two["tasks"][0]["replicaNumber"] = 2;
  const std::string id = k.Submit(two);
  k.WaitFor(id, [](const json& j) { return Replicas(j, "running") == std::set<int>{0, 1}; });
  const std::string scale = "/openapi/v1/trainjob/" + id + "/scale";

  auto up = k.rest->Post(scale, {{"taskIndex", 0}, {"replicaNumber", 4}});
  INFO(up.body.dump());
  REQUIRE(up.http_status == 200);
  CHECK(up.body["data"]["replicaNumber"] == 4);
  CHECK(up.body["data"]["previousReplicaNumber"] == 2);
  json job = k.WaitFor(id, [](const json& j) { return Replicas(j, "running") == std::set<int>{0, 1, 2, 3}; });
  CHECK(job["taskInfos"][0]["replicaNumber"] == 4);

  // Down to one: replicas 1 to 3 stop where they run; their attempts end "stopped" in the
  // history; replica 0 runs on, and so does the job.
  auto down = k.rest->Post(scale, {{"replicaNumber", 1}});
  INFO(down.body.dump());
  REQUIRE(down.http_status == 200);
  CHECK(down.body["data"]["previousReplicaNumber"] == 4);
  job = k.WaitFor(id, [](const json& j) {
    int closed = 0;
    for (const auto& a : j.value("history", json::array())) {
      if (a.value("replicaIndex", 0) >= 1 && a.contains("endedAt")) ++closed;
    }
    return closed == 3;
  });
  CHECK(job["status"] == "running");
  CHECK(job["taskInfos"][0]["replicaNumber"] == 1);
  CHECK(job["taskInfos"][0]["replicaStatus"] == json::array({"running"}));
  for (const auto& a : job["history"]) {
    INFO(a.dump());
    if (a.value("replicaIndex", 0) == 0) {
      CHECK_FALSE(a.contains("endedAt"));  // never stopped nor restarted
    } else {
      CHECK(a.value("outcome", "") == "stopped");
      CHECK(a.value("elapsedSeconds", 0.0) > 0);  // it ran: metered like any run
    }
  }
  // Scaling to the count it has changes nothing; back up to 2, replica 1 starts again as
  // a new attempt under its index.
  CHECK(k.rest->Post(scale, {{"replicaNumber", 1}}).http_status == 200);
  REQUIRE(k.rest->Post(scale, {{"replicaNumber", 2}}).http_status == 200);
  job = k.WaitFor(id, [](const json& j) { return Replicas(j, "running") == std::set<int>{0, 1}; });
  bool second_start = false;
  for (const auto& a : job["history"]) {
    if (a.value("replicaIndex", 0) == 1 && a.value("attempt", 0) == 1 && a.contains("startedAt")) second_start = true;
  }
  CHECK(second_start);
  // Each scale is audited, with the job it changed, in the write that made it.
  auto audit = k.rest->Get("/openapi/v1/audit?page_size=1000&action=JobService.ScaleTrainJob&outcome=OK");
  REQUIRE(audit.http_status == 200);
  const json rows = audit.body["data"].value("records", json::array());
  CHECK(rows.size() == 4);
  for (const auto& row : rows) CHECK(row.value("object", "") == "job_id=" + id);
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()));
  job = k.WaitFor(id, [](const json& j) { return j.value("status", "") == "completed"; });
  CHECK(job["statusReason"] == "stopped by the user (a service job ends when stopped)");
}

TEST_CASE("a scale is refused with a clear error, changing nothing, for bad counts, unknown tasks, jobs that do not "
          "scale and jobs that ended [A17][C5]",
          "[A17][C5]") {
  Kinds k;
  const std::string service = k.Submit(Kinds::Job("web", "exec sleep 120", "svc-1", "service"));
  const std::string batch = k.Submit(Kinds::Job("batch", "exec sleep 120", "svc-1", ""));
  const std::string notebook = k.Submit(Kinds::Job("nb", "exec sleep 120", "nb-1", "interactive"));
  k.WaitFor(service, [](const json& j) { return j.value("status", "") == "running"; });
  const json before = k.Get(service);
  struct Case {
    std::string job;
    json body;
    int http;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {service, {{"replicaNumber", 0}}, 400, "replicaNumber: must be 1 to 1000, got 0 (to end the job, stop it)"},
           {service, json::object(), 400, "replicaNumber: must be 1 to 1000, got 0"},
           {service, {{"replicaNumber", 1001}}, 400, "replicaNumber: must be 1 to 1000, got 1001"},
           {service, {{"replicaNumber", "two"}}, 400, "invalid value \"two\""},
           {service, {{"taskIndex", 3}, {"replicaNumber", 2}}, 404, "has no task 3 (it has 1 task: 0)"},
           {service, {{"replicaNumber", 50}}, 400,
            "replicaNumber: no registered center could ever run 50 replicas of task 0 at once"},
           {service, {{"jobId", batch}, {"replicaNumber", 2}}, 400, "jobId: the body names job"},
           {batch, {{"replicaNumber", 2}}, 409,
            "is a batch job: only service and streaming jobs scale (a batch job's replicas are fixed when it is "
            "submitted)"},
           {notebook, {{"replicaNumber", 2}}, 409, "is an interactive job: only service and streaming jobs scale"},
           {"job-99999999", {{"replicaNumber", 2}}, 404, "job-99999999"}}) {
    auto r = k.rest->Post("/openapi/v1/trainjob/" + c.job + "/scale", c.body);
    INFO(c.job << " " << c.body.dump() << ": " << r.body.dump());
    CHECK(r.http_status == c.http);
    CHECK(r.body.value("errorMsg", "").find(c.says) != std::string::npos);
  }
  json after = k.Get(service);
  CHECK(after["taskInfos"] == before["taskInfos"]);
  CHECK(after["updatedAt"] == before["updatedAt"]);
  // Ended: nothing to scale.
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + service + "/stop", json::object()));
  k.WaitFor(service, [](const json& j) { return j.value("status", "") == "completed"; });
  auto ended = k.rest->Post("/openapi/v1/trainjob/" + service + "/scale", {{"replicaNumber", 2}});
  CHECK(ended.http_status == 409);
  CHECK(ended.body.value("errorMsg", "").find("has already ended (completed); there is nothing to scale") !=
        std::string::npos);
  for (const std::string& id : {batch, notebook}) {
    Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()));
    // Stopped at the center before the test ends: a replica the adapter never heard the
    // stop of would outlive the test (and hold ctest's output pipe open).
    k.WaitFor(id, [](const json& j) {
      if (!j.contains("history") || j["history"].empty()) return false;
      for (const auto& attempt : j["history"]) {
        if (!attempt.contains("endedAt")) return false;
      }
      return true;
    });
  }
}

TEST_CASE("a service's named ports: each replica is given its own, it listens there, and the job says which replicas "
          "are ready, and bad ports are refused writing nothing [A17][C5]",
          "[A17][C5]") {
  Kinds k;
  json web = Kinds::Job("web", "exec python3 -m http.server $JC_PORT_HTTP --bind 127.0.0.1", "svc-1", "service");
  web["tasks"][0]["replicaNumber"] = 2;
  web["tasks"][0]["ports"] = json::array({{{"name", "http"}, {"readinessPath", "/"}}});
  const std::string id = k.Submit(web);
  json job = k.WaitFor(id, [](const json& j) { return j["taskInfos"][0].value("readyReplicas", 0) == 2; });
  const json endpoints = job["taskInfos"][0]["endpoints"];
  REQUIRE(endpoints.size() == 2);
  std::set<int> ports;
  for (const auto& e : endpoints) {
    CHECK(e["name"] == "http");
    CHECK(e["ready"] == true);
    ports.insert(e.value("port", 0));
  }
  CHECK(ports.size() == 2);  // never one port for two replicas
  // Each replica answers on its own port.
  for (int port : ports) {
    httplib::Client http("127.0.0.1", port);
    auto got = http.Get("/");
    REQUIRE(got);
    CHECK(got->status == 200);
  }
  // One more replica: ready too, on a port of its own.
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/scale", {{"replicaNumber", 3}}));
  job = k.WaitFor(id, [](const json& j) { return j["taskInfos"][0].value("readyReplicas", 0) == 3; });
  for (const auto& e : job["taskInfos"][0]["endpoints"]) ports.insert(e.value("port", 0));
  CHECK(ports.size() == 3);

  // Bad ports: 400 naming the field, nothing written.
  const size_t before = k.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size();
  json twice = Kinds::Job("twice", "true", "svc-1", "service");
  twice["tasks"][0]["ports"] = json::array({{{"name", "http"}}, {{"name", "http"}}});
  json outside = Kinds::Job("outside", "true", "svc-1", "service");
  outside["tasks"][0]["ports"] = json::array({{{"name", "http"}, {"port", 70000}}});
  for (const auto& [bad, says] : std::vector<std::pair<json, std::string>>{
           {twice, "tasks[0].ports[1].name: \"http\" is named twice"},
           {outside, "tasks[0].ports[0].port: 1 to 65535 (or 0: the center chooses), got 70000"}}) {
    auto r = k.rest->Post("/openapi/v1/trainjob", bad);
    INFO(r.body.dump());
    CHECK(r.http_status == 400);
    CHECK(r.body.value("errorMsg", "") == says);
  }
  CHECK(k.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size() == before);
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()));
  k.WaitFor(id, [](const json& j) { return j.value("status", "") == "completed"; });
}

TEST_CASE("a task that declares named ports is placed only at a center that gives replicas ports: where none does it "
          "is refused at submit saying why, and beside one that does it goes there [A17][C5]",
          "[A17][C5]") {
  // "bare": no ports: range. svc-2 only there; svc-3 at both, bare the cheaper.
  jc::testing::LocalAdapter bare("bare", 4,
                                 "security_grade: 3\nspecs:\n  - {id: svc-2, cpu: 1, memory: 256Mi}\n"
                                 "  - {id: svc-3, cpu: 1, memory: 256Mi}\n");
  Kinds k;
  Kinds::Must(k.rest->Post("/openapi/v1/centers", {{"ai_center_id", "bare"}, {"name", "bare"}, {"region", "cn"},
                                                   {"network_topology", "cn/bare"}, {"adapter_address", bare.address()},
                                                   {"capacity", {{"cpu", 4}, {"memory", 8192}}}}));
  for (const auto& [id, centers] : {std::pair<const char*, const char*>{"svc-2", "bare"}, {"svc-3", "bare,solo"}}) {
    Kinds::Must(k.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", id},
                                                          {"resource_spec_name", id},
                                                          {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                          {"service_type", "batch,streaming"},
                                                          {"price", 5},
                                                          {"computing_center_list", centers}}));
  }
  Kinds::Must(k.rest->Send("PUT", "/openapi/v1/resourcespecs/svc-3/centers/bare/price", R"({"price": 1})"));
  Kinds::Must(k.rest->Send("PUT", "/openapi/v1/resourcespecs/svc-3/centers/solo/price", R"({"price": 9})"));
  auto with_ports = [](const std::string& spec) {
    json job = Kinds::Job("web", "exec python3 -m http.server $JC_PORT_HTTP --bind 127.0.0.1", spec, "service");
    job["tasks"][0]["ports"] = json::array({{{"name", "http"}}});
    return job;
  };
  // Once the scheduler has heard from bare, a plan says why it is left out.
  std::string plan;
  REQUIRE(jc::testing::WaitUntil([&] {
    plan = k.rest->Post("/openapi/v1/scheduler/plan", with_ports("svc-2")).body.dump();
    return absl::StrContains(plan, "gives replicas none");
  }));
  INFO(plan);
  CHECK(absl::StrContains(plan, "ports_offered"));
  const size_t before = k.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size();
  auto refused = k.rest->Post("/openapi/v1/trainjob", with_ports("svc-2"));
  INFO(refused.body.dump());
  CHECK(refused.http_status == 400);
  CHECK(absl::StrContains(refused.body.value("errorMsg", ""), "removed by ports_offered: 1"));
  CHECK(k.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].size() == before);
  // svc-3: the service with a port goes to solo, whose range gives it one, though bare is
  // cheaper; a batch job of the same spec goes to bare.
  const std::string web = k.Submit(with_ports("svc-3"));
  json job = k.WaitFor(web, [](const json& j) { return j["taskInfos"][0].value("readyReplicas", 0) == 1; });
  CHECK(job["taskInfos"][0]["centerIDs"] == json::array({"solo"}));
  const std::string batch = k.Submit(Kinds::Job("batch", "true", "svc-3", ""));
  job = k.WaitFor(batch, [](const json& j) { return j.value("status", "") == "completed"; });
  CHECK(job["taskInfos"][0]["centerIDs"] == json::array({"bare"}));
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + web + "/stop", json::object()));
  k.WaitFor(web, [](const json& j) { return j.value("status", "") == "completed"; });
}

// Attacker's review, session 34: a stop that never reached the center (its adapter out of
// reach when the service was scaled down) was not sent again, and the replica ran on for good,
// unmetered; scaled up again, two attempts of one replica ran at once.
TEST_CASE("a stop that does not reach its center is sent again until it does: a replica scaled away whose first "
          "stops were lost ends at its center [A17][C7]",
          "[A17][C7]") {
  jc::testing::LocalAdapter center("solo", 4, CenterConfig(), [](jc::adapter::AdapterOptions& o) {
    o.listen = "127.0.0.1:0";  // TCP, behind the proxy
  });
  jc::testing::EventChaosProxy link(center.address(), 1, {0, 0});  // it loses stops, nothing else
  Kinds k({}, &center);
  k.Register("127.0.0.1:" + std::to_string(link.port()));
  json two = Kinds::Job("web", "exec sleep 300", "svc-1", "service");
  two["tasks"][0]["replicaNumber"] = 2;
  const std::string id = k.Submit(two);
  k.WaitFor(id, [](const json& j) { return Replicas(j, "running") == std::set<int>{0, 1}; });
  link.LoseStops(2);
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/scale", {{"replicaNumber", 1}}));
  // Replica 1's attempt ends at its center, as the center reports it (no estimate of the
  // control plane's: its grace is far longer than this wait), after two stops were lost.
  json job = k.WaitFor(id, [](const json& j) {
    for (const auto& a : j.value("history", json::array())) {
      if (a.value("replicaIndex", 0) == 1 && a.contains("endedAt")) return true;
    }
    return false;
  });
  CHECK(link.stops_lost() == 2);
  for (const auto& a : job["history"]) {
    if (a.value("replicaIndex", 0) != 1) continue;
    INFO(a.dump());
    CHECK(a.value("outcome", "") == "stopped");
    CHECK(a.value("message", "").find("never reported") == std::string::npos);
  }
  CHECK(job["status"] == "running");
  Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()));
  k.WaitFor(id, [](const json& j) { return j.value("status", "") == "completed"; });
}

// The control plane's end of the adapter's tunnel (services/southbound): what the gateway's
// proxy and port-forward will use (issue 46 item 2).
TEST_CASE("the control plane's adapter client opens a tunnel to a replica's named port and the bytes go both ways, "
          "and a port the replica does not have is refused [A17]",
          "[A17]") {
  jc::testing::LocalAdapter center("solo", 2, CenterConfig());
  auto client = jc::southbound::MakeGrpcAdapterClient();
  ::jointcloud::adapter::v1::SubmitReplicaRequest req;
  req.mutable_key()->set_job_id("tunnel-" + std::to_string(getpid()));
  req.set_command("exec python3 -m http.server $JC_PORT_WEB --bind 127.0.0.1");
  req.set_resource_spec_id("svc-1");
  auto* port = req.add_ports();
  port->set_name("web");
  port->set_readiness_path("/");
  auto submitted = client->Submit(center.address(), req);
  INFO(submitted.status().ToString());
  REQUIRE(submitted.ok());
  REQUIRE(jc::testing::WaitUntil([&] {
    auto r = client->Get(center.address(), req.key());
    return r.ok() && r->endpoints_size() == 1 && r->endpoints(0).ready();
  }));
  auto tunnel = client->OpenTunnel(center.address(), req.key(), "web");
  REQUIRE(tunnel.ok());
  REQUIRE((*tunnel)->Send("GET / HTTP/1.0\r\nHost: replica\r\n\r\n"));
  (*tunnel)->CloseSend();
  std::string answer;
  while (auto bytes = (*tunnel)->Receive()) answer += *bytes;
  CHECK((*tunnel)->Finish().ok());
  CHECK(answer.rfind("HTTP/1.0 200", 0) == 0);

  auto refused = client->OpenTunnel(center.address(), req.key(), "admin");
  REQUIRE(refused.ok());
  CHECK_FALSE((*refused)->Receive().has_value());
  absl::Status why = (*refused)->Finish();
  CHECK(why.code() == absl::StatusCode::kNotFound);
  CHECK(absl::StrContains(why.message(), "has no port named \"admin\""));
  CHECK(client->Stop(center.address(), req.key()).ok());
}

// SPEC A17, issue 46 under faults: "a center lost (services re-placed elsewhere, interactive
// jobs end with the reason)".
TEST_CASE("a center lost past the grace: its service's replica starts again at another center as a new attempt, its "
          "interactive job fails naming it, and once it answers again the old attempts are stopped there [A17][C7]",
          "[A17][C7]") {
  jc::testing::LocalAdapter center("solo", 4, CenterConfig(), [](jc::adapter::AdapterOptions& o) {
    o.listen = "127.0.0.1:0";  // TCP, behind the link that goes dark
  });
  const std::string address = center.address();
  jc::testing::TcpProxy link(std::stoi(address.substr(address.rfind(':') + 1)));
  Kinds k(
      [](jc::server::AppOptions& o) {
        // Longer than a monitor round that a silent center's calls hold up to their
        // deadlines (12 s): the other center is never taken for lost behind it.
        o.registry.unknown_after = absl::Seconds(15);
        o.registry.unavailable_after = absl::Seconds(20);
        o.health_sweep_interval = absl::Milliseconds(200);
        o.jobs.center_lost_grace = absl::Seconds(2);
        // Each poll's pass over the three jobs in three turns of the loop: what the lost
        // center holds is gathered across them (ContinueReconcile).
        o.jobs.walk_slice = 1;
      },
      &center);
  k.Register("127.0.0.1:" + std::to_string(link.port()));
  const std::string service = k.Submit(Kinds::Job("web", "exec sleep 300", "svc-1", "service"));
  const std::string notebook = k.Submit(Kinds::Job("nb", "exec sleep 300", "nb-1", "interactive"));
  const std::string batch = k.Submit(Kinds::Job("train", "exec sleep 300", "cpu-1", ""));
  for (const auto& id : {service, notebook, batch}) {
    k.WaitFor(id, [](const json& j) { return Replicas(j, "running") == std::set<int>{0}; });
  }
  // A second center offering the same specs.
  jc::testing::LocalAdapter spare("spare", 4, CenterConfig());
  Kinds::Must(k.rest->Post("/openapi/v1/centers", {{"ai_center_id", "spare"}, {"name", "spare"}, {"region", "cn"},
                                                   {"network_topology", "cn/spare"}, {"adapter_address", spare.address()},
                                                   {"capacity", {{"cpu", 4}, {"memory", 8192}}}}));
  for (const char* spec : {"cpu-1", "svc-1", "nb-1"}) {
    Kinds::Must(k.rest->Send("PATCH", std::string("/openapi/v1/resourcespecs/") + spec,
                             json{{"computing_center_list", "solo,spare"}}.dump()));
  }

  // solo goes dark: no heartbeat, its adapter unreachable.
  link.SetMode(jc::testing::TcpProxy::Mode::kBlackhole);
  // Noticed within the watch's 10 s recheck and its 10 s call, and the registry's 20 s, then
  // the 2 s grace and the service's 5 s back-off.
  json moved;
  bool started_elsewhere = jc::testing::WaitUntil([&] {
    moved = k.Get(service);
    const json a = Attempt(moved, 1);
    return !a.is_null() && a.value("centerID", "") == "spare" && Replicas(moved, "running") == std::set<int>{0};
  }, std::chrono::seconds(90));
  INFO(moved.dump());
  REQUIRE(started_elsewhere);
  const json first = Attempt(moved, 0);
  INFO(moved.dump());
  CHECK(first.value("centerID", "") == "solo");
  CHECK(absl::StartsWith(first.value("message", ""), "given up: center solo lost: "));
  CHECK(moved["status"] == "running");
  json failed = k.WaitFor(notebook, [](const json& j) { return j.value("status", "") == "failed"; });
  CHECK(absl::StrContains(failed.value("statusReason", ""), "center solo lost"));
  CHECK(k.rest->Get("/openapi/v1/centers/spare").body["data"].value("status", -1) == 1);
  // The batch job is left to its center's word: still running there, as far as anyone knows.
  json waiting = k.Get(batch);
  CHECK(waiting["status"] == "running");
  CHECK(Replicas(waiting, "running") == std::set<int>{0});

  // solo answers again: the attempts given up are stopped there (never two running at
  // once for long), and the batch job goes on where it was.
  link.SetMode(jc::testing::TcpProxy::Mode::kPass);
  json closed = k.WaitFor(service, [](const json& j) {
    const json a = Attempt(j, 0);
    return !a.is_null() && a.contains("endedAt");
  });
  CHECK(Attempt(closed, 0).value("outcome", "") == "stopped");
  CHECK(absl::StrContains(Attempt(closed, 0).value("message", ""), "given up: center solo lost: "));
  k.WaitFor(notebook, [](const json& j) {
    const json a = Attempt(j, 0);
    return !a.is_null() && a.contains("endedAt");
  });
  for (const auto& id : {service, batch}) Kinds::Must(k.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object()));
  for (const auto& id : {service, batch}) {
    k.WaitFor(id, [](const json& j) { return j.value("status", "") == "completed" || j.value("status", "") == "failed"; });
  }
}
