// Golden tests of the executor's scheduling policies: each file in data/ is a cluster,
// queues and jobs, and the placements expected cycle by cycle, in dispatch order.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "executor/policy/scheduler.h"

using nlohmann::json;
using namespace jc::nexec;

namespace {

ResourceValues ToValues(const json& obj) {
  ResourceValues v;
  for (const auto& [k, x] : obj.items()) {
    if (x.is_boolean()) v[k] = x.get<bool>();
    else if (x.is_number()) v[k] = x.get<double>();
    else v[k] = x.get<std::string>();
  }
  return v;
}

json Render(const std::vector<Placement>& placements) {
  json out = json::array();
  for (const auto& p : placements) {
    json sections = json::array();
    for (const auto& s : p.sections) {
      json hosts = json::array();
      for (const auto& a : s) {
        json h = {{"host", a.host}, {"slots", a.slots}};
        if (!a.gpus.empty()) h["gpus"] = a.gpus;
        hosts.push_back(h);
      }
      sections.push_back(hosts);
    }
    out.push_back({{"job", p.job_id}, {"sections", sections}});
  }
  return out;
}

void RunGolden(const std::filesystem::path& path) {
  std::ifstream in(path);
  json doc = json::parse(in);
  INFO(path.filename().string() << ": " << doc.value("description", ""));
  Scheduler s;
  for (const auto& t : doc.value("host_types", json::array())) {
    REQUIRE(s.AddHostType({t["name"], t["cpu_factor"]}).ok());
  }
  for (const auto& h : doc["hosts"]) {
    HostConfig c;
    c.name = h["name"];
    c.type = h.value("type", "");
    c.slots = h.value("slots", 1);
    c.mem_mb = h.value("mem", 0.0);
    c.gpus = h.value("gpus", std::vector<int>{});
    c.resources = ToValues(h.value("resources", json::object()));
    REQUIRE(s.AddHost(c).ok());
  }
  for (const auto& q : doc["queues"]) {
    QueueConfig c;
    c.name = q["name"];
    c.priority = q.value("priority", 0);
    c.users = q.value("users", std::vector<std::string>{});
    c.hosts = q.value("hosts", std::vector<std::string>{});
    c.max_slots = q.value("max_slots", 0);
    c.max_slots_per_user = q.value("max_slots_per_user", 0);
    c.balance = q.value("balance", "pack") == "spread" ? Balance::kSpread : Balance::kPack;
    c.user_round_robin = q.value("round_robin", false);
    c.gpu_shared = q.value("gpu_shared", false);
    REQUIRE(s.AddQueue(c).ok());
  }
  for (const auto& j : doc["jobs"]) {
    JobRequest r;
    r.id = j["id"];
    r.user = j["user"];
    r.queue = j["queue"];
    r.slots = j.value("slots", 1);
    r.exclusive = j.value("exclusive", false);
    r.gpus_per_slot = j.value("gpus", 0);
    auto req = ParseRequirement(j.value("req", ""));
    REQUIRE(req.ok());
    r.requirement = *req;
    auto submitted = s.Submit(r);
    INFO("job " << r.id << ": " << submitted);
    REQUIRE(submitted.ok());
  }
  int n = 0;
  for (const auto& cycle : doc["cycles"]) {
    for (int64_t id : cycle.value("release", std::vector<int64_t>{})) REQUIRE(s.Release(id).ok());
    json got = Render(s.Cycle());
    INFO("cycle " << n++);
    CHECK(got.dump() == cycle["expect"].dump());
  }
}

}  // namespace

TEST_CASE("scheduling policies place jobs as the golden files say", "[B3][B5][B6][golden]") {
  std::filesystem::path dir = std::filesystem::path(JC_SOURCE_DIR) / "tests/unit/executor/data";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    SECTION(entry.path().filename().string()) { RunGolden(entry.path()); }
    ++files;
  }
  CHECK(files >= 10);
}

TEST_CASE("jobs that can never run are refused at submission", "[B5][B6][C5]") {
  Scheduler s;
  REQUIRE(s.AddHost({"h1", "", 4, 1000, 0, {0}, {}}).ok());
  QueueConfig batch;
  batch.name = "batch";
  batch.users = {"devs"};
  batch.allow_interactive = false;
  REQUIRE(s.AddQueue(batch).ok());
  s.DefineUserGroup("devs", {"alice"});
  auto submit = [&](JobRequest r) {
    if (r.queue.empty()) r.queue = "batch";
    if (r.user.empty()) r.user = "alice";
    return s.Submit(r);
  };
  JobRequest r;
  r.id = 1;
  r.queue = "nope";
  CHECK(absl::IsInvalidArgument(submit(r)));
  r.queue = "batch";
  r.user = "mallory";
  CHECK(absl::IsPermissionDenied(submit(r)));
  r.user = "alice";
  r.interactive = true;
  CHECK(absl::IsInvalidArgument(submit(r)));
  r.interactive = false;
  r.slots = 5;
  CHECK(absl::IsInvalidArgument(submit(r)));  // more than the cluster has
  r.slots = 0;
  CHECK(absl::IsInvalidArgument(submit(r)));
  r.slots = 1;
  r.requirement = *ParseRequirement("rusage[gpu=0.5]");
  CHECK(absl::IsInvalidArgument(submit(r)));
  CHECK(s.pending() == 0);
  r.requirement = *ParseRequirement("rusage[gpu=1]");
  REQUIRE(submit(r).ok());
  CHECK(absl::IsAlreadyExists(submit(r)));
  CHECK(s.pending() == 1);
  REQUIRE(s.Cancel(1).ok());
  CHECK(s.pending() == 0);
  CHECK(absl::IsNotFound(s.Cancel(1)));
}

TEST_CASE("a restored running job keeps its resources", "[B3][B11]") {
  Scheduler s;
  REQUIRE(s.AddHost({"h1", "", 2, 0, 0, {0, 1}, {}}).ok());
  REQUIRE(s.AddQueue({"normal"}).ok());
  JobRequest old;
  old.id = 7;
  old.user = "u";
  old.queue = "normal";
  old.slots = 2;
  Placement p;
  p.job_id = 7;
  p.sections = {{{"h1", 2, {0, 1}, 0}}};
  REQUIRE(s.Restore(old, p).ok());
  CHECK(s.free_slots("h1") == 0);
  JobRequest next = old;
  next.id = 8;
  next.slots = 1;
  REQUIRE(s.Submit(next).ok());
  CHECK(s.Cycle().empty());
  REQUIRE(s.Release(7).ok());
  CHECK(s.Cycle().size() == 1);
}

TEST_CASE("a sensor's direction decides which end of order[] is most: increase means a larger value is less", "[B1]") {
  Scheduler s;
  REQUIRE(s.AddHost({"h1", "", 2, 0, 0, {}, {}}).ok());
  REQUIRE(s.AddHost({"h2", "", 2, 0, 0, {}, {}}).ok());
  REQUIRE(s.AddQueue({"normal"}).ok());
  REQUIRE(s.SetHostResource("h1", "netload", 50.0).ok());
  REQUIRE(s.SetHostResource("h2", "netload", 5.0).ok());
  auto place = [&](int64_t id, const std::string& requirement) {
    JobRequest r;
    r.id = id;
    r.user = "u";
    r.queue = "normal";
    r.slots = 1;
    r.requirement = *ParseRequirement(requirement);
    REQUIRE(s.Submit(r).ok());
    auto placed = s.Cycle();
    REQUIRE(placed.size() == 1);
    std::string host = placed[0].sections[0][0].host;
    REQUIRE(s.Release(id).ok());
    return host;
  };
  CHECK(place(1, "order[netload]") == "h1");  // decrease (the default): the largest first
  ResourceTraits increase;
  increase.larger_is_less = true;
  s.SetResourceTraits("netload", increase);
  CHECK(place(2, "order[netload]") == "h2");  // increase: the smallest is the most
  CHECK(place(3, "order[-netload]") == "h1");
  REQUIRE(s.SetHostResource("h1", "licenses", 4.0).ok());
  REQUIRE(s.SetHostResource("h2", "licenses", 4.0).ok());
  CHECK(place(4, "select[licenses>=1 && defined(netload)] order[netload]") == "h2");
}
