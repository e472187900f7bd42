// Run-as accounts (SPEC C6): a center maps Jointcloud projects and users to its own
// accounts; replicas run as the mapped account, never as root; a center that maps no
// account for a job is filtered out with its reason; a replica whose mapping was removed
// after the scheduler placed it fails there, saying why.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "adapters/sdk/adapter_core.h"
#include "tests/testing/local_adapter.h"
#include "tests/testing/process.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/test_account.h"
#include "tests/testing/test_system.h"

using nlohmann::json;

namespace {

void Must(const jc::testing::RestReply& r) {
  INFO(r.body.dump());
  REQUIRE(r.http_status == 200);
}

std::string Center(const std::string& run_as) {
  return "security_grade: 3\nrun_as: " + run_as + "\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n";
}

json WaitForJob(jc::testing::RestClient& rest, const std::string& id, const std::string& status) {
  json job;
  bool reached = jc::testing::WaitUntil([&] {
    job = rest.Get("/openapi/v1/trainjob/" + id).body["data"];
    return job.value("status", "") == status;
  });
  INFO(job.dump());
  REQUIRE(reached);
  return job;
}

}  // namespace

TEST_CASE("replicas run as the account their center maps the job's project to, centers without one are "
          "filtered, and a mapping removed after placement fails the replica with its reason [C6][A8]",
          "[C6][A8]") {
  if (geteuid() != 0) {
    WARN("not run: switching replicas to another account needs root (CI runs as root)");
    return;
  }
  jc::testing::TestAccount account("jc-run-as-test");
  // `mapped` runs project vision's replicas as the test account; `cheap` (cheaper) only nlp's.
  jc::testing::LocalAdapter mapped("mapped", 8, Center("{projects: {vision: " + account.name + "}}"));
  jc::testing::LocalAdapter cheap("cheap", 8, Center("{projects: {nlp: " + account.name + "}}"));
  jc::testing::TestSystem sys([](jc::server::AppOptions& o) {
    o.monitor.interval = absl::Milliseconds(100);
    o.scheduler_refresh = absl::Milliseconds(50);
    o.jobs.cycle_interval = absl::Milliseconds(50);
    o.jobs.poll_interval = absl::Milliseconds(200);
  });
  for (auto* a : {&mapped, &cheap}) {
    std::string id = a == &mapped ? "mapped" : "cheap";
    Must(sys.rest->Post("/openapi/v1/centers", {{"ai_center_id", id}, {"name", id}, {"region", "cn"},
                                                {"network_topology", "cn/" + id}, {"adapter_address", a->address()},
                                                {"capacity", {{"cpu", 8}, {"memory", 8192}}}}));
  }
  Must(sys.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "cpu-1"},
                                                   {"resource_spec_name", "1 CPU"},
                                                   {"resource_quantity", {{"cpu", "1"}, {"memory", "256Mi"}}},
                                                   {"service_type", "batch"},
                                                   {"price", 5},
                                                   {"computing_center_list", "mapped,cheap"}}));
  Must(sys.rest->Send("PUT", "/openapi/v1/resourcespecs/cpu-1/centers/cheap/price", R"({"price": 1})"));
  REQUIRE(jc::testing::WaitUntil([&] {
    return sys.rest->Get("/scheduler/algorithm/lowest_price/score/mapped?resourceSpecId=cpu-1").http_status == 200 &&
           sys.rest->Get("/scheduler/algorithm/lowest_price/score/cheap?resourceSpecId=cpu-1").http_status == 200;
  }));
  auto alice = sys.UserClient("alice", "vision", "MEMBER");
  auto job = [](const std::string& name) {
    return json{{"name", name},
                {"tasks", {{{"name", "t"}, {"command", "id"}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 1}}}}};
  };

  // alice's job runs at the center that maps vision, as the mapped account.
  auto created = alice->Post("/openapi/v1/trainjob", job("who"));
  INFO(created.body.dump());
  REQUIRE(created.http_status == 200);
  std::string id = created.body["data"]["jobId"];
  json done = WaitForJob(*alice, id, "completed");
  CHECK(done["taskInfos"][0]["centerIDs"] == json::array({"mapped"}));
  auto log = alice->http().Get(("/openapi/v1/trainjob/" + id + "/task/0/replica/0/log/content").c_str());
  std::string out = log ? log->body : "";
  INFO(out);
  CHECK(out.find("uid=" + std::to_string(account.uid) + "(" + account.name + ")") != std::string::npos);
  CHECK(out.find("uid=0(") == std::string::npos);
  // The cheaper center was filtered, and the placement record says why.
  auto placement = sys.rest->Get("/openapi/v1/trainjob/" + id + "/placement");
  INFO(placement.body.dump());
  bool explained = false;
  for (const auto& c : placement.body["data"]["replicas"][0]["centers"]) {
    if (c["centerId"] != "cheap") continue;
    CHECK(c["filteredBy"] == "run_as_account");
    CHECK(c.value("reason", "").find("maps no local account for project vision") != std::string::npos);
    explained = true;
  }
  CHECK(explained);

  // A project no center maps waits, saying which filter removed the centers.
  auto bob = sys.UserClient("bob", "robotics", "MEMBER");
  auto waiting = bob->Post("/openapi/v1/trainjob", job("nowhere"));
  INFO(waiting.body.dump());
  REQUIRE(waiting.http_status == 200);
  std::string waiting_id = waiting.body["data"]["jobId"];
  json pending;
  CHECK(jc::testing::WaitUntil([&] {
    pending = bob->Get("/openapi/v1/trainjob/" + waiting_id).body["data"];
    return pending.value("statusReason", "").find("run_as_account: 2") != std::string::npos;
  }));
  INFO(pending.dump());
  CHECK(pending["status"] == "pending");

  // The center drops vision's mapping (as a SIGHUP reload does); the control plane still has
  // its old center info, so it sends the next replica there, and the center refuses it.
  jc::adapter::RunAs none;
  none.configured = true;  // a run_as section that maps nobody
  mapped.server->core().SetRunAs(none);
  auto again = alice->Post("/openapi/v1/trainjob", job("after"));
  INFO(again.body.dump());
  REQUIRE(again.http_status == 200);
  json failed = WaitForJob(*alice, again.body["data"]["jobId"], "failed");
  CHECK(failed.value("statusReason", "").find("center mapped maps no local account for project \"vision\"") !=
        std::string::npos);
}
