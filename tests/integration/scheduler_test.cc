// The scheduler's API (Appendix A.5, A.6, plus strategies, profiles and the dry-run plan)
// over REST, with its view built from the registry, catalog and datamon of the same
// process (SPEC A8, A9, A10, A12).

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>

#include "tests/testing/process.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

struct System : jc::testing::TestSystem {
  explicit System(const std::function<void(jc::server::AppOptions&)>& more = {})
      : TestSystem([&](jc::server::AppOptions& o) {
          o.scheduler_refresh = absl::Milliseconds(50);
          if (more) more(o);
        }) {
    for (const auto& [id, topology] : {std::pair{"cheap", "cn/north/cheap"}, std::pair{"dear", "cn/south/dear"}}) {
      json c = {{"ai_center_id", id}, {"name", id}, {"region", "cn"}, {"network_topology", topology},
                {"security_grade", 3}, {"capacity", {{"cpu", 64}, {"gpu", 8}, {"memory", 262144}}}};
      Must(rest->Post("/openapi/v1/centers", c));
      Must(rest->Post(std::string("/openapi/v1/centers/") + id + "/heartbeat", json::object()));
    }
    Must(rest->Post("/openapi/v1/resourcespecs",
                    {{"resource_spec_id", "gpu-1"},
                     {"resource_spec_name", "4 CPU, 1 GPU"},
                     {"resource_quantity", {{"cpu", "4"}, {"memory", "16Gi"}, {"gpu", "1"}}},
                     {"service_type", "batch"},
                     {"price", 20},
                     {"computing_center_list", "cheap,dear"}}));
    Must(rest->Send("PUT", "/openapi/v1/resourcespecs/gpu-1/centers/cheap/price", R"({"price": 5})"));
    Must(rest->Send("PUT", "/openapi/v1/resourcespecs/gpu-1/centers/dear/price", R"({"price": 50})"));
    for (const char* center : {"cheap", "dear"}) {
      Must(rest->Post("/openapi/v1/images", {{"image_id", std::string("torch-") + center},
                                             {"name", "torch"},
                                             {"ai_center_id", center},
                                             {"framework", "PyTorch"},
                                             {"resource_spec", "gpu-1"}}));
    }
    // The scheduler refreshes its view on its own; wait until it has these centers and
    // images (a refresh under way while they were registered may have missed some), each
    // image's center placeable now (its usage read: until then it has nothing free).
    bool ready = jc::testing::WaitUntil([&] {
      if (rest->Get("/scheduler/algorithm/lowest_price/score/dear?resourceSpecId=gpu-1").http_status != 200) return false;
      for (const char* image : {"torch-cheap", "torch-dear"}) {
        json probe = {{"name", "ready"},
                      {"tasks", {{{"name", "t"}, {"command", "true"}, {"imageId", image}, {"resourceSpecId", "gpu-1"},
                                  {"replicaNumber", 1}}}}};
        auto plan = rest->Post("/openapi/v1/scheduler/plan", probe);
        if (plan.http_status != 200 || !plan.body["data"].value("placed", false)) return false;
      }
      return true;
    });
    REQUIRE(ready);
  }
  static void Must(const jc::testing::RestReply& r) {
    INFO(r.body.dump());
    REQUIRE(r.http_status == 200);
  }
};

void ExpectError(const jc::testing::RestReply& r, int http, const std::string& needle) {
  INFO(r.body.dump());
  CHECK(r.http_status == http);
  CHECK(r.body["status"] == http);
  CHECK(r.body["errorMsg"].get<std::string>().find(needle) != std::string::npos);
}

TEST_CASE("A.5: one strategy's score of a center, normalized among the candidates [A9][A12]", "[A9][A12]") {
  System s;
  auto cheap = s.rest->Get("/scheduler/algorithm/lowest_price/score/cheap?resourceSpecId=gpu-1").body;
  auto dear = s.rest->Get("/scheduler/algorithm/lowest_price/score/dear?resourceSpecId=gpu-1").body;
  CHECK(cheap["status"] == 200);
  CHECK(cheap["data"]["score"] == 100);
  CHECK(dear["data"]["score"] == 0);
  // Without a spec, each center is judged by its cheapest offer: the same here.
  CHECK(s.rest->Get("/scheduler/algorithm/lowest_price/score/cheap").body["data"]["score"] == 100);
  // Idle centers tie on load: both best.
  CHECK(s.rest->Get("/scheduler/algorithm/least_load/score/dear").body["data"]["score"] == 100);

  ExpectError(s.rest->Get("/scheduler/algorithm/fastest/score/cheap"), 404, "fastest");
  ExpectError(s.rest->Get("/scheduler/algorithm/lowest_price/score/nowhere"), 404, "nowhere");
  ExpectError(s.rest->Get("/scheduler/algorithm/lowest_price/score/cheap?resourceSpecId=tpu-9"), 404, "tpu-9");
}

TEST_CASE("A.6: the evaluation model's score is formula 2 over the given scores [A10][A12]", "[A10][A12]") {
  System s;
  auto r = s.rest->Get("/scheduler/evaluate/score/cheap?algorithmIds=least_load,lowest_price&algorithmScores=80,90");
  INFO(r.body.dump());
  CHECK(r.body["data"]["score"] == 170);  // default profile: weights 1
  // Repeated parameters work too, and a profile changes the weights: 80 x 1 + 90 x 4.
  r = s.rest->Get(
      "/scheduler/evaluate/score/cheap?algorithmIds=least_load&algorithmIds=lowest_price&algorithmScores=80"
      "&algorithmScores=90&weightProfile=cost");
  CHECK(r.body["data"]["score"] == 440);

  ExpectError(s.rest->Get("/scheduler/evaluate/score/cheap?algorithmIds=least_load&algorithmScores=1,2"), 400,
              "algorithmScores");
  ExpectError(s.rest->Get("/scheduler/evaluate/score/cheap?algorithmIds=nope&algorithmScores=1"), 400, "nope");
  ExpectError(s.rest->Get("/scheduler/evaluate/score/cheap?algorithmIds=least_load&algorithmScores=101"), 400,
              "0..100");
  ExpectError(s.rest->Get("/scheduler/evaluate/score/cheap?algorithmIds=least_load&algorithmScores=x"), 400,
              "not an integer");
  ExpectError(s.rest->Get("/scheduler/evaluate/score/cheap"), 400, "algorithmIds");
  ExpectError(s.rest->Get("/scheduler/evaluate/score/nowhere?algorithmIds=least_load&algorithmScores=1"), 404,
              "nowhere");
  ExpectError(s.rest->Get("/scheduler/evaluate/score/cheap?algorithmIds=least_load&algorithmScores=1&weightProfile=x"),
              400, "weight profile");
}

TEST_CASE("strategies and weight profiles are listed with what they read [A9][A10]", "[A9][A10]") {
  System s;
  auto algorithms = s.rest->Get("/openapi/v1/scheduler/algorithms").body["data"]["algorithms"];
  CHECK(algorithms.size() == 13);
  CHECK_FALSE(algorithms[0]["inputs"].get<std::string>().empty());
  auto profiles = s.rest->Get("/openapi/v1/scheduler/weight-profiles").body["data"]["profiles"];
  bool found = false;
  for (const auto& p : profiles) {
    if (p["name"] == "cost") {
      found = true;
      CHECK(p["weights"]["lowest_price"] == 4);
    }
  }
  CHECK(found);
}

json Profile(System& s, const std::string& name) {
  auto listed = s.rest->Get("/openapi/v1/scheduler/weight-profiles");
  for (const auto& p : listed.body["data"]["profiles"]) {
    if (p["name"] == name) return p;
  }
  UNSCOPED_INFO(listed.body.dump());
  return json();
}

double MetricValue(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

TEST_CASE("weight profiles come from a file, name their model, and reload when it changes [A10]", "[A10]") {
  std::string path = (std::filesystem::temp_directory_path() / ("jc-profiles-" + std::to_string(getpid()) + ".yaml")).string();
  std::ofstream(path) << "profiles:\n  strict:\n    model: lexicographic\n"
                         "    weights: {highest_security: 2, lowest_price: 1}\n";
  System s([&](jc::server::AppOptions& o) { o.weight_profiles_file = path; });
  json strict = Profile(s, "strict");
  INFO(strict.dump());
  CHECK(strict["model"] == "lexicographic");
  CHECK(strict["weights"]["highest_security"] == 2);
  CHECK(Profile(s, "cost")["model"] == "weighted_sum");  // the built-in ones stay
  // A job chooses it by name.
  json job = {{"name", "p"}, {"scheduling", {{"weightProfile", "strict"}}},
              {"tasks", {{{"name", "t"}, {"command", "true"}, {"resourceSpecId", "gpu-1"}, {"imageId", "torch-cheap"},
                          {"replicaNumber", 1}}}}};
  auto plan = s.rest->Post("/openapi/v1/scheduler/plan", job);
  INFO(plan.body.dump());
  CHECK(plan.http_status == 200);

  // Changed on disk: the scheduler rereads it.
  std::ofstream(path, std::ios::trunc) << "profiles:\n  strict: {lowest_price: 3}\n";
  bool reloaded = jc::testing::WaitUntil([&] { return Profile(s, "strict")["weights"].value("lowest_price", 0.0) == 3; });
  CHECK(reloaded);
  CHECK(Profile(s, "strict")["model"] == "weighted_sum");
  // A file that does not load is reported and changes nothing.
  std::ofstream(path, std::ios::trunc) << "profiles:\n  strict: {fastest: 1}\n";
  bool failed = jc::testing::WaitUntil([&] {
    return MetricValue(s.rest->Raw("/metrics"), "jc_weight_profile_reloads_total{result=\"error\"}") >= 1;
  });
  CHECK(failed);
  CHECK(Profile(s, "strict")["weights"]["lowest_price"] == 3);
  std::filesystem::remove(path);
}

TEST_CASE("a server given a weight-profiles file that does not load does not start [A10]", "[A10]") {
  std::string path = (std::filesystem::temp_directory_path() / ("jc-bad-profiles-" + std::to_string(getpid()) + ".yaml")).string();
  std::ofstream(path) << "profiles:\n  x: {least_load: -2}\n";
  jc::server::AppOptions o;
  o.services = *jc::server::ParseServices("all");
  o.grpc_address = "127.0.0.1:0";
  o.rest_port = 0;
  o.store = jc::testing::MakeTestStore();
  o.weight_profiles_file = path;
  auto started = jc::server::App::Start(std::move(o));
  REQUIRE_FALSE(started.ok());
  CHECK(std::string(started.status().message()).find("weight profiles: profiles.x.least_load") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("plan: a dry run says where each replica would go and why, and changes nothing [A8][A10]",
          "[A8][A10]") {
  System s;
  json job = {{"name", "resnet"},
              {"tasks", {{{"name", "train"}, {"command", "python train.py"}, {"imageId", "torch-cheap"},
                          {"resourceSpecId", "gpu-1"}, {"replicaNumber", 2}}}},
              {"scheduling", {{"weightProfile", "cost"}}}};
  auto r = s.rest->Post("/openapi/v1/scheduler/plan", job);
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
  const json& plan = r.body["data"];
  CHECK(plan["placed"] == true);
  REQUIRE(plan["replicas"].size() == 2);
  CHECK(plan["replicas"][0]["centerId"] == "cheap");
  CHECK(plan["replicas"][1]["centerId"] == "cheap");
  // Every center is explained: "dear" lacks the image, "cheap" has its scores.
  for (const auto& c : plan["replicas"][0]["centers"]) {
    if (c["centerId"] == "dear") {
      CHECK(c["filteredBy"] == "image_present");
      CHECK(c["reason"].get<std::string>().find("torch-cheap") != std::string::npos);
    } else {
      CHECK(c["feasible"] == true);
      CHECK(c["scores"]["lowest_price"] == 100);
      CHECK(c["weights"]["lowest_price"] == 4);
    }
  }
  // A dry run reserves nothing: the same plan again gives the same answer.
  auto again = s.rest->Post("/openapi/v1/scheduler/plan", job).body["data"];
  CHECK(again["replicas"][1]["centerId"] == "cheap");

  // replicaNumber left out is one replica, as a create takes it.
  json one = job;
  one["tasks"][0].erase("replicaNumber");
  auto single = s.rest->Post("/openapi/v1/scheduler/plan", one);
  INFO(single.body.dump());
  REQUIRE(single.http_status == 200);
  CHECK(single.body["data"]["replicas"].size() == 1);

  json bad = job;
  bad["tasks"][0]["resourceSpecId"] = "tpu-9";
  ExpectError(s.rest->Post("/openapi/v1/scheduler/plan", bad), 400, "resourceSpecId");
  bad = job;
  bad["tasks"][0]["replicaNumber"] = 0;
  ExpectError(s.rest->Post("/openapi/v1/scheduler/plan", bad), 400, "replicaNumber");
  bad = job;
  bad["scheduling"]["weightProfile"] = "fastest";
  ExpectError(s.rest->Post("/openapi/v1/scheduler/plan", bad), 400, "fastest");
  ExpectError(s.rest->Send("POST", "/openapi/v1/scheduler/plan", "{not json"), 400, "malformed");
}

// A plan is refused what a create is refused, in the same words: before, a plan with a
// negative or year-long duration, or a name a log line takes for two, was answered
// (attacker's review, session 29, F6 and F8).
TEST_CASE("plan refuses what a create refuses, with the same message: durations out of range and control "
          "characters in names [A16][A8][C5]",
          "[A16][A8][C5]") {
  System s;
  json job = {{"name", "resnet"},
              {"tasks", {{{"name", "train"}, {"command", "python train.py"}, {"imageId", "torch-cheap"},
                          {"resourceSpecId", "gpu-1"}, {"replicaNumber", 1}}}}};
  System::Must(s.rest->Post("/openapi/v1/scheduler/plan", job));
  struct Bad {
    std::function<void(json&)> make;
    const char* says;
  };
  for (const Bad& bad : std::vector<Bad>{
           {[](json& j) { j["estimatedDuration"] = "-5s"; }, "estimatedDuration: must be a positive duration"},
           {[](json& j) { j["timeLimit"] = "0s"; }, "timeLimit: must be a positive duration"},
           {[](json& j) { j["timeLimit"] = "40000000s"; }, "timeLimit: at most 366 days"},
           {[](json& j) { j["estimatedDuration"] = "31622401s"; }, "estimatedDuration: at most 366 days"},
           {[](json& j) { j["name"] = "a\nforged line"; }, "name: no control characters"},
           {[](json& j) { j["tasks"][0]["name"] = "\u001b[2J"; }, "tasks[0].name: no control characters"}}) {
    json body = job;
    bad.make(body);
    auto plan = s.rest->Post("/openapi/v1/scheduler/plan", body);
    auto create = s.rest->Post("/openapi/v1/trainjob", body);
    INFO(body.dump() << "\nplan: " << plan.body.dump() << "\ncreate: " << create.body.dump());
    ExpectError(plan, 400, bad.says);
    ExpectError(create, 400, bad.says);
    CHECK(plan.body["errorMsg"] == create.body["errorMsg"]);
  }
}

}  // namespace
