// Jobs' run times (SPEC A16, issue 45) end to end: learned from the runs that ended, kept in
// the store across a restart, said in the plan and on the job; the submitter's own estimate
// and time limit; a time limit enforced; the queue ordered shortest expected first.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

#include "tests/testing/local_adapter.h"
#include "tests/testing/process.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

constexpr char kCenterConfig[] =
    "security_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n  - {id: cpu-2, cpu: 2, memory: 256Mi}\n";

// A control plane with one center of `cpus` CPUs offering cpu-1 (and cpu-2, which a test
// registers when it needs a job as wide as the center).
struct Federation : jc::testing::TestSystem {
  jc::testing::LocalAdapter solo;

  Federation(int cpus, const std::function<void(jc::server::AppOptions&)>& more = {})
      : TestSystem([&](jc::server::AppOptions& o) {
          jc::testing::FastIntervals(o);
          if (more) more(o);
        }),
        solo("solo", cpus, kCenterConfig) {
    Register(*this, solo.address(), cpus);
  }

  static void Must(const jc::testing::RestReply& r) {
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
  }
  // The center and its spec, and a wait until the scheduler can place on it.
  static void Register(jc::testing::TestSystem& s, const std::string& address, int cpus) {
    Must(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", "solo"}, {"name", "solo"}, {"region", "cn"},
                                              {"network_topology", "cn/solo"}, {"adapter_address", address},
                                              {"capacity", {{"cpu", cpus}, {"memory", 8192}}}}));
    Must(s.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                    {"resource_spec_name", "1 CPU"},
                                                    {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                    {"service_type", "batch"},
                                                    {"price", 1},
                                                    {"computing_center_list", "solo"}}));
    REQUIRE(jc::testing::WaitUntil([&] {
      return s.rest->Post("/openapi/v1/scheduler/plan", Job("ready", "true")).body.dump().find("\"placed\":true") !=
             std::string::npos;
    }));
  }
  static json Job(const std::string& name, const std::string& command, const json& extra = json::object()) {
    json job = {{"name", name},
                {"tasks", {{{"name", "t"}, {"command", command}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 1}}}}};
    job.update(extra);
    return job;
  }
};

std::string Submit(jc::testing::RestClient& c, const json& job) {
  auto r = c.Post("/openapi/v1/trainjob", job);
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
  return r.body["data"]["jobId"];
}

json WaitForStatus(jc::testing::RestClient& c, const std::string& id, const std::string& status) {
  json job;
  bool reached = jc::testing::WaitUntil([&] {
    job = c.Get("/openapi/v1/trainjob/" + id).body["data"];
    return job.value("status", "") == status;
  });
  INFO(job.dump());
  REQUIRE(reached);
  return job;
}

// Waits until job `id`'s status reason says `text`; the job as last read.
json WaitForReason(jc::testing::RestClient& c, const std::string& id, const std::string& text) {
  json job;
  bool said = jc::testing::WaitUntil([&] {
    job = c.Get("/openapi/v1/trainjob/" + id).body["data"];
    return job.value("statusReason", "").find(text) != std::string::npos;
  });
  INFO(job.dump());
  REQUIRE(said);
  return job;
}

// What the plan says of the job's run time ("" when nothing).
std::string PlannedDuration(jc::testing::RestClient& c, const json& job) {
  auto r = c.Post("/openapi/v1/scheduler/plan", job);
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
  std::string said;
  for (const auto& line : r.body["data"].value("expectedDurations", json::array())) said += line.get<std::string>();
  return said;
}

// Registers a local center `id` of `cpus` CPUs.
void RegisterCenter(jc::testing::TestSystem& s, const std::string& id, const jc::testing::LocalAdapter& at, int cpus) {
  Federation::Must(s.rest->Post("/openapi/v1/centers", {{"ai_center_id", id},
                                                        {"name", id},
                                                        {"region", "cn"},
                                                        {"network_topology", "cn/" + id},
                                                        {"adapter_address", at.address()},
                                                        {"capacity", {{"cpu", cpus}, {"memory", 8192}}}}));
}

TEST_CASE("a job's placement explanation is kept with it: after a restart of the control plane, and asked of a "
          "standby, explain shows where it went and why, as kept [A16][C2]",
          "[A16][C2]") {
  // Issue 49 item 4: after a restart `job explain` said "never placed" of a job placed 40 s
  // before (the records lived in the deciding instance's memory only).
  const std::string name = "jc_placements_" + std::to_string(getpid());
  std::filesystem::remove(std::filesystem::temp_directory_path() / (name + ".db"));
  auto options = [&](const std::string& instance) {
    return [&, instance](jc::server::AppOptions& o) {
      jc::testing::FastIntervals(o);
      jc::testing::ShareStore(o, name);
      o.jobs.instance_id = instance;
    };
  };
  jc::testing::LocalAdapter solo("solo", 2, kCenterConfig);
  std::string job;
  {
    auto first = std::make_unique<jc::testing::TestSystem>(options("one"));
    Federation::Register(*first, solo.address(), 2);
    auto alice = first->UserClient("alice", "vision", "MEMBER");
    job = Submit(*alice, Federation::Job("train", "true"));
    WaitForStatus(*alice, job, "completed");
    auto fresh = alice->Get("/openapi/v1/trainjob/" + job + "/placement");
    INFO(fresh.body.dump());
    REQUIRE(fresh.http_status == 200);
    CHECK(fresh.body["data"].value("fromHistory", false) == false);
    CHECK_FALSE(fresh.body["data"].value("decidedAt", "").empty());
    // Asked of another instance sharing the store (it decided nothing): as kept there, once
    // the batch is written (about a second).
    jc::testing::TestSystem standby(options("two"));
    json kept;
    REQUIRE(jc::testing::WaitUntil([&] {
      auto r = standby.rest->Get("/openapi/v1/trainjob/" + job + "/placement");
      kept = r.body;
      return r.http_status == 200;
    }));
    INFO(kept.dump());
    CHECK(kept["data"]["fromHistory"] == true);
    CHECK(kept["data"]["replicas"][0]["centerId"] == "solo");
    CHECK(kept["data"]["decidedAt"] == fresh.body["data"]["decidedAt"]);
    standby.app->Shutdown();
    first->app->Shutdown();
  }
  // Restarted on the same store: explained as it was, the chosen center and its marks.
  jc::testing::TestSystem second(options("one"));
  auto alice = second.UserClient("alice", "vision", "MEMBER");
  auto after = alice->Get("/openapi/v1/trainjob/" + job + "/placement");
  INFO(after.body.dump());
  REQUIRE(after.http_status == 200);
  const json& p = after.body["data"];
  CHECK(p["placed"] == true);
  CHECK(p["fromHistory"] == true);
  REQUIRE(p["replicas"].size() == 1);
  CHECK(p["replicas"][0]["centerId"] == "solo");
  bool chosen = false;
  for (const auto& c : p["replicas"][0]["centers"]) {
    if (c["centerId"] != "solo") continue;
    CHECK(c["feasible"] == true);
    for (const auto& m : c["marks"]) chosen |= m == "chosen";
  }
  CHECK(chosen);
  // Still only to those who may see the job; a job never placed is still not found.
  auto bob = second.UserClient("bob", "nlp", "MEMBER");
  CHECK(bob->Get("/openapi/v1/trainjob/" + job + "/placement").http_status == 404);
  CHECK(alice->Get("/openapi/v1/trainjob/job-99999999/placement").http_status == 404);
}

TEST_CASE("run times are learned from the runs that ended: the plan and the next job say 'median of 2 runs of this "
          "command of this name by this user', and a restarted control plane still knows [A16]",
          "[A16]") {
  const std::string name = "jc_durations_" + std::to_string(getpid());
  const std::string db = (std::filesystem::temp_directory_path() / (name + ".db")).string();
  std::filesystem::remove(db);
  auto options = [&](jc::server::AppOptions& o) {
    jc::testing::ShareStore(o, name);
    o.jobs.instance_id = "one";  // the same instance again after the restart: its lease at once
  };
  jc::testing::LocalAdapter solo("solo", 2, kCenterConfig);
  const json train = Federation::Job("train", "sleep 1");
  {
    auto first = std::make_unique<jc::testing::TestSystem>(options);
    Federation::Register(*first, solo.address(), 2);
    auto alice = first->UserClient("alice", "vision", "MEMBER");
    // Nothing is known of a job never run: the plan says nothing, and assumes an hour.
    CHECK(PlannedDuration(*alice, train).empty());
    for (int i = 0; i < 2; ++i) WaitForStatus(*alice, Submit(*alice, train), "completed");
    std::string said;
    REQUIRE(jc::testing::WaitUntil([&] {
      said = PlannedDuration(*alice, train);
      return said.find("median of 2 runs of this command of this name by this user") != std::string::npos;
    }));
    CHECK(said.find("task t: ") == 0);
    // The next job of the name carries what was expected of it.
    json third = WaitForStatus(*alice, Submit(*alice, train), "completed");
    INFO(third.dump());
    CHECK(third["expectedDuration"]["runs"] == "2");
    CHECK(third["expectedDuration"]["basis"].get<std::string>().find("median of 2 runs") != std::string::npos);
    // Known by its own command: sef ranks it at its median.
    CHECK(third["expectedDuration"]["assumed"] == third["expectedDuration"]["median"]);
    // A name she never ran: her other jobs of the spec answer, and it is assumed as a one-off.
    const std::string one_off = PlannedDuration(*alice, Federation::Job("eval", "sleep 3"));
    CHECK(one_off.find("runs of this user's jobs of this spec: ") != std::string::npos);
    CHECK(one_off.find(" (a one-off: assumed ") != std::string::npos);
    // Another command of the name: the name's history still answers, said so.
    CHECK(PlannedDuration(*alice, Federation::Job("train", "sleep 2")).find("runs of this name by this user") !=
          std::string::npos);
    // Another project's job of the name learns nothing from vision's; its own estimate is used.
    auto bob = first->UserClient("bob", "nlp", "MEMBER");
    CHECK(PlannedDuration(*bob, train).empty());
    CHECK(PlannedDuration(*bob, Federation::Job("train", "sleep 1", {{"estimatedDuration", "600s"}})) ==
          "task t: the job's own estimate: 10 min");
    first->app->Shutdown();
  }
  // Restarted on the same store: what was learned was committed with the jobs.
  jc::testing::TestSystem second(options);
  auto alice = second.UserClient("alice", "vision", "MEMBER");
  std::string said;
  CHECK(jc::testing::WaitUntil([&] {
    said = PlannedDuration(*alice, train);
    return said.find("median of 3 runs of this command of this name by this user") != std::string::npos;
  }));
  INFO(said);
  second.app->Shutdown();
  std::filesystem::remove(db);
}

// Attacker's review, session 29 (F5): every replica's end was a run of its task's classes, so
// one job of 1,000 replicas stuffed 1,000 observations into its keys at once and swamped
// their medians. A task's first replica stands for it: one run per task per attempt.
TEST_CASE("a task of many replicas is one run of its class per attempt, not one per replica [A16][C6]",
          "[A16][C6]") {
  Federation f(4);
  auto alice = f.UserClient("alice", "vision", "MEMBER");
  json wide = Federation::Job("wide", "sleep 1");
  wide["tasks"][0]["replicaNumber"] = 4;
  WaitForStatus(*alice, Submit(*alice, wide), "completed");
  WaitForStatus(*alice, Submit(*alice, wide), "completed");
  std::string said;
  const bool learned = jc::testing::WaitUntil([&] {
    said = PlannedDuration(*alice, wide);
    return said.find("median of ") != std::string::npos;
  });
  INFO(said);
  REQUIRE(learned);
  CHECK(said.find("median of 2 runs of this command of this name by this user") != std::string::npos);
}

// Session 67: a one-off (a name its user never ran) is known only through the user's other
// jobs of the spec; the scheduler counts on it running between their median and 90th
// percentile, for its expected finish as for its rank, and the record says so.
TEST_CASE("a one-off is assumed to run between its user's median and 90th percentile: the job's expectedDuration "
          "says so and the plan's expected finish counts that long [A16]",
          "[A16]") {
  Federation f(4);
  auto alice = f.UserClient("alice", "vision", "MEMBER");
  // Three quick jobs and a long one, each of its own name: her history of the spec is skewed.
  std::vector<std::string> ran;
  // (sleep 0.2, not true: a run that ends within the clock's tick is 0 s long, and not learned)
  for (int i = 0; i < 3; ++i) ran.push_back(Submit(*alice, Federation::Job("quick-" + std::to_string(i), "sleep 0.2")));
  ran.push_back(Submit(*alice, Federation::Job("long", "sleep 5")));
  for (const std::string& id : ran) WaitForStatus(*alice, id, "completed");
  const json one_off = Federation::Job("never-ran", "sleep 0.2");
  REQUIRE(jc::testing::WaitUntil(
      [&] { return PlannedDuration(*alice, one_off).find("task t: median of 4 runs of this user's jobs of this spec") == 0; }));
  auto seconds = [](const json& d) { return std::stod(d.get<std::string>()); };  // "1.503s"
  const json expected = WaitForStatus(*alice, Submit(*alice, one_off), "completed")["expectedDuration"];
  INFO(expected.dump());
  const double median = seconds(expected["median"]), p90 = seconds(expected["p90"]), assumed = seconds(expected["assumed"]);
  CHECK(p90 > 2 * median);
  CHECK(assumed == Approx(std::sqrt(median * p90)).epsilon(0.01));
  CHECK(expected["basis"].get<std::string>().find("(a one-off: assumed ") != std::string::npos);
  // The plan, with one more run of hers learned by now: its expected run at solo (performance
  // 1, free) is what the job's record would assume, not the median.
  auto plan = alice->Post("/openapi/v1/scheduler/plan", one_off);
  INFO(plan.body.dump());
  REQUIRE(plan.http_status == 200);
  const json& c = plan.body["data"]["replicas"][0]["centers"][0];
  const double run = c.value("expectedFinishSeconds", 0.0) - c.value("expectedStartSeconds", 0.0);
  const json now = WaitForStatus(*alice, Submit(*alice, one_off), "completed")["expectedDuration"];
  INFO(now.dump());
  CHECK(seconds(now["assumed"]) > seconds(now["median"]) * 1.2);
  CHECK(run == Approx(seconds(now["assumed"])).epsilon(0.02));
}

// Attacker's review, session 29 (F8): the estimator is loaded when an instance leads; a
// standby's plans answered from one never loaded (nothing known, presented as such) and an
// instance that stepped down kept its old history. A plan there now says it has none.
TEST_CASE("a standby's plan says it holds no run history and uses the job's own figures, while the leader's says "
          "what it learned [A16][A7]",
          "[A16][A7]") {
  const std::string name = "jc_durations_standby_" + std::to_string(getpid());
  std::filesystem::remove(std::filesystem::temp_directory_path() / (name + ".db"));
  auto options = [&](const std::string& instance) {
    return [&, instance](jc::server::AppOptions& o) {
      jc::testing::FastIntervals(o);
      jc::testing::ShareStore(o, name);
      o.jobs.instance_id = instance;
      o.jobs.lease_ttl = absl::Seconds(30);
    };
  };
  jc::testing::LocalAdapter solo("solo", 2, kCenterConfig);
  auto leader = std::make_unique<jc::testing::TestSystem>(options("one"));
  Federation::Register(*leader, solo.address(), 2);
  jc::testing::TestSystem standby(options("two"));
  auto alice = leader->UserClient("alice", "vision", "MEMBER");
  const json train = Federation::Job("train", "sleep 1");
  for (int i = 0; i < 2; ++i) WaitForStatus(*alice, Submit(*alice, train), "completed");
  // Planned by an admin in alice's project: the project's history of the name answers.
  json planned = train;
  planned["project"] = "vision";
  planned["estimatedDuration"] = "600s";
  std::string said;
  REQUIRE(jc::testing::WaitUntil([&] {
    said = PlannedDuration(*leader->rest, planned);
    return said.find("median of 2 runs of this name in this project") != std::string::npos;
  }));
  CHECK(said.find("no run history here") == std::string::npos);
  REQUIRE(jc::testing::WaitUntil([&] {
    return standby.rest->Post("/openapi/v1/scheduler/plan", planned).body.dump().find("\"placed\":true") !=
           std::string::npos;
  }));
  said = PlannedDuration(*standby.rest, planned);
  INFO(said);
  CHECK(said.find("no run history here: this instance's job manager is not leading") != std::string::npos);
  CHECK(said.find("median of") == std::string::npos);
  CHECK(said.find("task t: the job's own estimate: 10 min") != std::string::npos);
  leader->app->Shutdown();
  standby.app->Shutdown();
  std::filesystem::remove(std::filesystem::temp_directory_path() / (name + ".db"));
}

// Attacker's review, session 29 (F5): a project past its share of the estimator's keys
// loses its own oldest, and their rows leave the store with them: a restarted control
// plane reads back the most recent rows up to the bound, which a flood's rows left behind
// would otherwise fill, evicting everyone else's history at the restart.
TEST_CASE("a project's churn evicts its own rows from the store too: after a restart another project's history is "
          "still there [A16][C6]",
          "[A16][C6]") {
  const std::string name = "jc_durations_share_" + std::to_string(getpid());
  std::filesystem::remove(std::filesystem::temp_directory_path() / (name + ".db"));
  auto options = [&](jc::server::AppOptions& o) {
    jc::testing::FastIntervals(o);
    jc::testing::ShareStore(o, name);
    o.jobs.instance_id = "one";
    o.estimator.max_keys = 15;
    o.estimator.max_keys_per_project = 5;  // one job's five keys
  };
  jc::testing::LocalAdapter solo("solo", 2, kCenterConfig);
  const json train = Federation::Job("train", "sleep 1");
  {
    jc::testing::TestSystem first(options);
    Federation::Register(first, solo.address(), 2);
    auto alice = first.UserClient("alice", "vision", "MEMBER");
    for (int i = 0; i < 2; ++i) WaitForStatus(*alice, Submit(*alice, train), "completed");
    // Another project churns through names: each job's keys evict its previous ones. Each
    // runs a second, so that most of its rows are stored a second later than alice's (rows
    // are read back newest first, by the second): kept, they would fill the bound.
    auto mallory = first.UserClient("mallory", "flood", "MEMBER");
    for (int i = 0; i < 6; ++i) {
      WaitForStatus(*mallory, Submit(*mallory, Federation::Job("churn-" + std::to_string(i), "sleep 1")),
                    "completed");
    }
    REQUIRE(jc::testing::WaitUntil([&] {
      return PlannedDuration(*alice, train).find("median of 2 runs of this command") != std::string::npos;
    }));
    first.app->Shutdown();
  }
  jc::testing::TestSystem second(options);
  auto alice = second.UserClient("alice", "vision", "MEMBER");
  std::string said;
  CHECK(jc::testing::WaitUntil([&] {
    said = PlannedDuration(*alice, train);
    return said.find("median of 2 runs of this command of this name by this user") != std::string::npos;
  }));
  INFO(said);
  second.app->Shutdown();
  std::filesystem::remove(std::filesystem::temp_directory_path() / (name + ".db"));
}

TEST_CASE("a job's time limit stops a replica that runs past it, saying so, and bad durations are refused and "
          "change nothing [A16]",
          "[A16]") {
  // The walk over the jobs each second (limits, moves, gauges) a job a turn of the loop,
  // its rest posted behind what queued: the limit and the gauges still see every job.
  Federation f(2, [](jc::server::AppOptions& o) { o.jobs.walk_slice = 1; });
  auto alice = f.UserClient("alice", "vision", "MEMBER");
  for (const auto& [field, value, says] :
       {std::tuple<const char*, const char*, const char*>{"timeLimit", "-5s", "timeLimit: must be a positive"},
        {"estimatedDuration", "0s", "estimatedDuration: must be a positive"},
        {"timeLimit", "40000000s", "timeLimit: at most 366 days"},
        {"estimatedDuration", "ten minutes", "estimatedDuration"}}) {
    auto r = alice->Post("/openapi/v1/trainjob", Federation::Job("bad", "true", {{field, value}}));
    INFO(r.body.dump());
    CHECK(r.http_status == 400);
    CHECK(r.body.dump().find(says) != std::string::npos);
  }
  CHECK(f.rest->Get("/openapi/v1/trainjob").body["data"]["jobs"].empty());

  const std::string limited = Submit(*alice, Federation::Job("limited", "sleep 60", {{"timeLimit", "1s"}}));
  const std::string within = Submit(*alice, Federation::Job("within", "sleep 0.2", {{"timeLimit", "60s"}}));
  const std::string after = Submit(*alice, Federation::Job("after", "sleep 60", {{"timeLimit", "2s"}}));
  // Until the walk reaches its end the gauges are not set: while the long ones run, they say so.
  CHECK(jc::testing::WaitUntil([&] {
    return std::regex_search(f.rest->Raw("/metrics"), std::regex("\njc_jobs\\{status=\"running\"\\} [1-3]\n"));
  }));
  json stopped = WaitForStatus(*alice, limited, "failed");
  CHECK(stopped.value("statusReason", "").find("ran past the job's time limit of 1 s") != std::string::npos);
  CHECK(stopped["timeLimit"] == "1s");
  json done = WaitForStatus(*alice, within, "completed");
  CHECK(done["timeLimit"] == "60s");
  // The third job, which the walk reaches turns after the first, is stopped by its limit too.
  json last = WaitForStatus(*alice, after, "failed");
  CHECK(last.value("statusReason", "").find("ran past the job's time limit of 2 s") != std::string::npos);
}

TEST_CASE("shortest expected first and highest response ratio next: a short job submitted behind a long one runs "
          "first when the center frees, and first come first served runs them in order [A16][A11]",
          "[A16][A11]") {
  for (const std::string order : {"sef", "hrrn", "fcfs"}) {
    DYNAMIC_SECTION(order) {
      Federation f(1, [&](jc::server::AppOptions& o) { o.jobs.queue = *jc::scheduler::ParseQueueSettings(order); });
      auto alice = f.UserClient("alice", "vision", "MEMBER");
      // The center's one CPU is taken; a long job, then a short one, wait behind it.
      const std::string blocker = Submit(*alice, Federation::Job("blocker", "sleep 60"));
      WaitForStatus(*alice, blocker, "running");
      // Without history, sef ranks by the time limit (enforced), never by the unenforced
      // estimatedDuration: "long" saying it is short does not go first.
      const std::string long_job = Submit(
          *alice, Federation::Job("long", "sleep 30", {{"timeLimit", "3600s"}, {"estimatedDuration", "1s"}}));
      const std::string short_job = Submit(*alice, Federation::Job("short", "true", {{"timeLimit", "10s"}}));
      REQUIRE(alice->Get("/openapi/v1/trainjob/" + short_job).body["data"]["status"] == "pending");
      // Each waiting job says where it stands in the queue, and why.
      std::string short_at, long_at;
      bool placed_in_queue = jc::testing::WaitUntil([&] {
        short_at = alice->Get("/openapi/v1/trainjob/" + short_job).body["data"].value("queuePosition", "");
        long_at = alice->Get("/openapi/v1/trainjob/" + long_job).body["data"].value("queuePosition", "");
        return !short_at.empty() && !long_at.empty();
      });
      INFO(short_at << " | " << long_at);
      REQUIRE(placed_in_queue);
      if (order == "sef") {
        CHECK(short_at.rfind("1st of 2 waiting (sef): shortest expected first: expected 10s, waited ", 0) == 0);
        CHECK(long_at.rfind("2nd of 2 waiting (sef): shortest expected first: expected 1h, waited ", 0) == 0);
      } else if (order == "hrrn") {
        // Its ratio climbs a tenth a second it waits; the hour's, by a 3600th.
        CHECK(short_at.rfind("1st of 2 waiting (hrrn): highest response ratio next: expected 10s, waited ", 0) == 0);
        CHECK(long_at.rfind("2nd of 2 waiting (hrrn): highest response ratio next: expected 1h, waited ", 0) == 0);
      } else {
        CHECK(long_at == "1st of 2 waiting (fcfs)");
        CHECK(short_at == "2nd of 2 waiting (fcfs)");
      }
      f.rest->Post("/openapi/v1/trainjob/" + blocker + "/stop", json::object());
      if (order != "fcfs") {
        // Limited to 10 s against an hour: the short one takes the freed CPU, the long waits.
        WaitForStatus(*alice, short_job, "completed");
        CHECK(alice->Get("/openapi/v1/trainjob/" + long_job).body["data"]["status"] == "pending");
      } else {
        WaitForStatus(*alice, long_job, "running");
        CHECK(alice->Get("/openapi/v1/trainjob/" + short_job).body["data"]["status"] == "pending");
      }
      for (const auto& id : {long_job, short_job}) f.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object());
    }
  }
}

// Session 68: a job's estimate was taken once, when it was created; a job of a name never
// run kept the default hour in the queue while its name's runs ended elsewhere.
TEST_CASE("a waiting job is ranked by what its name's runs taught while it waited: it goes ahead of a job limited to "
          "10 min, keeps its place after a restart of the control plane, and runs first when the center frees [A16]",
          "[A16]") {
  const std::string name = "jc_reestimate_" + std::to_string(getpid());
  const std::string db = (std::filesystem::temp_directory_path() / (name + ".db")).string();
  std::filesystem::remove(db);
  auto options = [&](jc::server::AppOptions& o) {
    jc::testing::FastIntervals(o);
    jc::testing::ShareStore(o, name);
    o.jobs.instance_id = "one";  // the same instance again after the restart: its lease at once
    o.jobs.queue = *jc::scheduler::ParseQueueSettings("sef");
  };
  jc::testing::LocalAdapter east("east", 1, kCenterConfig), west("west", 2, kCenterConfig);
  auto s = std::make_unique<jc::testing::TestSystem>(options);
  RegisterCenter(*s, "east", east, 1);
  RegisterCenter(*s, "west", west, 2);
  Federation::Must(s->rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                               {"resource_spec_name", "1 CPU"},
                                                               {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                               {"service_type", "batch"},
                                                               {"price", 1},
                                                               {"computing_center_list", "east,west"}}));
  auto alice = s->UserClient("alice", "vision", "MEMBER");
  auto bob = s->UserClient("bob", "vision", "MEMBER");
  auto at = [](json job, const std::string& center) {
    job["tasks"][0]["centerIDs"] = json::array({center});
    return job;
  };
  // East's one CPU is taken; two jobs wait for it: alice's "train", never run (the default
  // hour), and bob's "eval", limited to 10 min (bob's: what alice's runs teach is not his).
  const std::string blocker = Submit(*alice, at(Federation::Job("blocker", "sleep 60"), "east"));
  WaitForStatus(*alice, blocker, "running");
  const json train = Federation::Job("train", "sleep 1");
  const std::string waiting_train = Submit(*alice, at(train, "east"));
  const std::string eval = Submit(*bob, at(Federation::Job("eval", "sleep 30", {{"timeLimit", "600s"}}), "east"));
  std::string train_at, eval_at;
  auto positions = [&] {
    train_at = alice->Get("/openapi/v1/trainjob/" + waiting_train).body["data"].value("queuePosition", "");
    eval_at = bob->Get("/openapi/v1/trainjob/" + eval).body["data"].value("queuePosition", "");
  };
  REQUIRE(jc::testing::WaitUntil([&] {
    positions();
    return train_at.rfind("2nd of 2 waiting (sef): shortest expected first: expected 1h", 0) == 0 &&
           eval_at.rfind("1st of 2 waiting (sef): shortest expected first: expected 10m", 0) == 0;
  }));
  // Two runs of "train" end at west while it waits: it is expected to take a second or two
  // now (as measured on a loaded machine).
  for (int i = 0; i < 2; ++i) WaitForStatus(*alice, Submit(*alice, at(train, "west")), "completed");
  const std::regex short_now("1st of 2 waiting \\(sef\\): shortest expected first: expected [123]s, .*");
  auto goes_first = [&] {
    const bool ahead = jc::testing::WaitUntil([&] {
      positions();
      return std::regex_match(train_at, short_now);
    });
    INFO(train_at << " | " << eval_at << " | "
                  << alice->Get("/openapi/v1/trainjob/" + waiting_train).body["data"].value("statusReason", ""));
    REQUIRE(ahead);
    CHECK(eval_at.rfind("2nd of 2 waiting (sef): shortest expected first: expected 10m", 0) == 0);
  };
  goes_first();
  // Its record keeps what was expected when it was created: nothing.
  CHECK_FALSE(alice->Get("/openapi/v1/trainjob/" + waiting_train).body["data"].contains("expectedDuration"));
  // Restarted on the same store: the waiting jobs' records say what was expected at their
  // creation, the history what ended since; the new term asks again.
  s->app->Shutdown();
  s.reset();
  s = std::make_unique<jc::testing::TestSystem>(options);
  alice = s->UserClient("alice", "vision", "MEMBER");
  bob = s->UserClient("bob", "vision", "MEMBER");
  goes_first();
  // East frees: "train" takes it; "eval" waits behind it.
  s->rest->Post("/openapi/v1/trainjob/" + blocker + "/stop", json::object());
  WaitForStatus(*alice, waiting_train, "running");
  CHECK(bob->Get("/openapi/v1/trainjob/" + eval).body["data"]["status"] == "pending");
  WaitForStatus(*bob, eval, "running");
  s->rest->Post("/openapi/v1/trainjob/" + eval + "/stop", json::object());
  s->app->Shutdown();
  s.reset();
  std::filesystem::remove(db);
}

TEST_CASE("nothing starves: a job that needs the whole center, past the queue's longest wait, has the center drain for "
          "it, so a small job submitted after it no longer takes the free CPU, and it runs when the center frees [A16]",
          "[A16]") {
  Federation f(2, [](jc::server::AppOptions& o) {
    o.jobs.queue = *jc::scheduler::ParseQueueSettings("fcfs");
    o.jobs.queue.max_wait_s = 1;
    // A job kept off a draining center is not one no center can ever run: it never fails for it.
    o.jobs.unsatisfiable_grace = absl::Seconds(1);
  });
  Federation::Must(f.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-2"},
                                                              {"resource_spec_name", "2 CPUs"},
                                                              {"resource_quantity", {{"cpu", "2"}, {"memory", "256Mi"}}},
                                                              {"service_type", "batch"},
                                                              {"price", 2},
                                                              {"computing_center_list", "solo"}}));
  auto alice = f.UserClient("alice", "vision", "MEMBER");
  const std::string holder = Submit(*alice, Federation::Job("holder", "sleep 60"));
  WaitForStatus(*alice, holder, "running");
  json wide = Federation::Job("wide", "true");
  wide["tasks"][0]["resourceSpecId"] = "cpu-2";
  const std::string big = Submit(*alice, wide);
  // Overdue after a second: the center drains for it, and says so.
  WaitForReason(*alice, big, "solo drains for it");
  // A 1-CPU job would fit the free CPU (backfill); the drain keeps it off, though it comes
  // at a higher priority (placed before the overdue job in every pass) and has no history
  // or time limit to end by.
  // (vision is granted priority 1: a member asks above 0 only what an admin granted)
  Federation::Must(f.rest->Send("PUT", "/openapi/v1/projects/vision/quota", R"({"max_priority": 1})"));
  std::string small;
  REQUIRE(jc::testing::WaitUntil([&] {
    auto r = alice->Post("/openapi/v1/trainjob", Federation::Job("small", "true", {{"scheduling", {{"priority", 1}}}}));
    if (r.http_status == 200) small = r.body["data"]["jobId"];
    return !small.empty();
  }));
  json held = WaitForReason(*alice, small, "draining_for_overdue_job");
  CHECK(held["status"] == "pending");
  // The center frees: the wide job runs first, then the small one.
  f.rest->Post("/openapi/v1/trainjob/" + holder + "/stop", json::object());
  json done = WaitForStatus(*alice, big, "completed");
  json after = WaitForStatus(*alice, small, "completed");
  CHECK(done["updatedAt"].get<std::string>() <= after["updatedAt"].get<std::string>());
}

TEST_CASE("one drain per project at a time: a project's second overdue wide job does not hold a second center "
          "idle, so a small job still starts there [A16]",
          "[A16]") {
  jc::testing::TestSystem s([](jc::server::AppOptions& o) {
    jc::testing::FastIntervals(o);
    o.jobs.queue = *jc::scheduler::ParseQueueSettings("fcfs");
    o.jobs.queue.max_wait_s = 1;
  });
  jc::testing::LocalAdapter east("east", 2, kCenterConfig), west("west", 2, kCenterConfig);
  RegisterCenter(s, "east", east, 2);
  RegisterCenter(s, "west", west, 2);
  for (const auto& [id, cpus] : {std::pair<std::string, int>{"cpu-1", 1}, {"cpu-2", 2}}) {
    Federation::Must(s.rest->Post("/openapi/v1/resourcespecs",
                                  {{"resource_spec_id", id},
                                   {"resource_spec_name", id},
                                   {"resource_quantity", {{"cpu", std::to_string(cpus)}, {"memory", "256Mi"}}},
                                   {"service_type", "batch"},
                                   {"price", cpus},
                                   {"computing_center_list", "east,west"}}));
  }
  auto alice = s.UserClient("alice", "vision", "MEMBER");
  // One CPU of each center taken (placed by hand).
  std::vector<std::string> holders;
  for (const char* at : {"east", "west"}) {
    json holder = Federation::Job("holder", "sleep 60");
    holder["tasks"][0]["centerIDs"] = json::array({at});
    holders.push_back(Submit(*alice, holder));
  }
  for (const auto& id : holders) WaitForStatus(*alice, id, "running");
  // Two wide jobs of the project, both overdue after a second: one drain between them.
  json wide = Federation::Job("wide", "true");
  wide["tasks"][0]["resourceSpecId"] = "cpu-2";
  const std::string first = Submit(*alice, wide);
  const std::string second = Submit(*alice, wide);
  json a = WaitForReason(*alice, first, "drains for it");
  // The second says why it has no drain of its own; the other center takes a small job.
  json b = WaitForReason(*alice, second, "its project's drain (one at a time) is at ");
  const std::string small = Submit(*alice, Federation::Job("small", "sleep 30"));
  json ran = WaitForStatus(*alice, small, "running");
  b = alice->Get("/openapi/v1/trainjob/" + second).body["data"];
  INFO(a.dump() << "\n" << b.dump());
  CHECK(b.value("statusReason", "").find("drains for it") == std::string::npos);
  CHECK(a.value("statusReason", "").find(ran["taskInfos"][0]["centerIDs"][0].get<std::string>() + " drains") ==
        std::string::npos);
  for (const auto& id : {holders[0], holders[1], first, second, small}) {
    s.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object());
  }
}

TEST_CASE("scarce capacity goes first to the jobs that can use nothing else: while a job that only one center offers "
          "waits for it, a job that runs anywhere goes to another center that can start it, and its placement says "
          "why [A16]",
          "[A16]") {
  jc::testing::TestSystem s([](jc::server::AppOptions& o) { jc::testing::FastIntervals(o); });
  // east: 2 CPUs, west: 4.
  jc::testing::LocalAdapter east("east", 2, kCenterConfig), west("west", 4, kCenterConfig);
  RegisterCenter(s, "east", east, 2);
  RegisterCenter(s, "west", west, 4);
  // cpu-1 everywhere; cpu-2 only at east.
  for (const auto& [id, where] :
       {std::pair<std::string, std::string>{"cpu-1", "east,west"}, {"cpu-2", "east"}}) {
    Federation::Must(s.rest->Post("/openapi/v1/resourcespecs",
                                  {{"resource_spec_id", id},
                                   {"resource_spec_name", id},
                                   {"resource_quantity", {{"cpu", id == "cpu-1" ? "1" : "2"}, {"memory", "256Mi"}}},
                                   {"service_type", "batch"},
                                   {"price", 1},
                                   {"computing_center_list", where}}));
  }
  auto alice = s.UserClient("alice", "vision", "MEMBER");
  // One of east's CPUs taken (placed by hand): east has one free, west four.
  json hold = Federation::Job("holder", "sleep 60");
  hold["tasks"][0]["centerIDs"] = json::array({"east"});
  const std::string holder = Submit(*alice, hold);
  WaitForStatus(*alice, holder, "running");
  json wide = Federation::Job("wide", "true");
  wide["tasks"][0]["resourceSpecId"] = "cpu-2";
  const std::string narrow = Submit(*alice, wide);
  // Once a pass has found it no room, it keeps east.
  WaitForReason(*alice, narrow, "no center can run it now");
  // Small jobs (east's free CPU would hold each; the tie goes to the first registered) go
  // where the narrow job does not wait.
  std::vector<std::string> smalls;
  for (int i = 0; i < 2; ++i) {
    // East's free CPU is in the scheduler's view (its usage report has caught up with the
    // holder): the small job could take it. And west has been heard from (a center not
    // yet polled is no candidate: under load its first report can come late).
    for (const char* at : {"east", "west"}) {
      json probe = Federation::Job("probe", "true");
      probe["tasks"][0]["centerIDs"] = json::array({at});
      INFO(at);
      REQUIRE(jc::testing::WaitUntil([&] {
        return s.rest->Post("/openapi/v1/scheduler/plan", probe).body.dump().find("\"placed\":true") !=
               std::string::npos;
      }));
    }
    const std::string small = Submit(*alice, Federation::Job("small", "sleep 30"));
    json running = WaitForStatus(*alice, small, "running");
    INFO(running.dump());
    CHECK(running["taskInfos"][0]["centerIDs"][0] == "west");
    smalls.push_back(small);
    auto placement = alice->Get("/openapi/v1/trainjob/" + small + "/placement");
    INFO(placement.body.dump());
    REQUIRE(placement.http_status == 200);
    bool said = false;
    for (const auto& c : placement.body["data"]["replicas"][0]["centers"]) {
      if (c["centerId"] != "east") continue;
      said = true;
      CHECK(c["filteredBy"] == "kept_for_narrower_job");
      CHECK(c.value("reason", "").find("kept for a waiting job that can run at only 1 center") != std::string::npos);
    }
    CHECK(said);
  }
  // The narrow job still waits (east is busy, not idled for it), then runs when east frees.
  CHECK(alice->Get("/openapi/v1/trainjob/" + narrow).body["data"]["status"] == "pending");
  s.rest->Post("/openapi/v1/trainjob/" + holder + "/stop", json::object());
  WaitForStatus(*alice, narrow, "completed");
  for (const auto& id : smalls) s.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object());
}

}  // namespace
