// Learned run times survive the control plane's SIGKILL (SPEC A16, C7): the estimator's rows
// are written in the transaction that closes the attempts they learn from, so a job seen
// completed is a run the next process knows, on either store.

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/testing/process.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/server_processes.h"

using nlohmann::json;

namespace {

json Job() {
  return {{"name", "learned"},
          {"tasks", {{{"name", "t"}, {"command", "sleep 1"}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 1}}}}};
}

std::string Planned(jc::testing::RestClient& rest) {
  auto r = rest.Post("/openapi/v1/scheduler/plan", Job());
  std::string said;
  if (r.http_status != 200) return said;
  for (const auto& line : r.body["data"].value("expectedDurations", json::array())) said += line.get<std::string>();
  return said;
}

}  // namespace

TEST_CASE("run times learned before a SIGKILL of the control plane are known after its restart: every run seen "
          "completed counts [A16][C7]",
          "[A16][C7]") {
  auto dir = std::filesystem::temp_directory_path() / ("jc-e2e-durations-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  int port = 0;
  auto adapter = jc::testing::StartLocalAdapterProcess(JC_ADAPTER_LOCAL, dir.string(), "local", 4, &port);
  auto server = jc::testing::StartServerProcess(JC_SERVER_BINARY, dir.string(), "e2e_durations", "server1.log");
  std::string token = jc::testing::AdminToken((dir / "admin.token").string());
  {
    jc::testing::RestClient rest(server.rest_port, token);
    REQUIRE(jc::testing::AddCenterWithSpec(rest, "local", "127.0.0.1:" + std::to_string(port), 4, 4096, "256Mi"));
    for (int i = 0; i < 3; ++i) {
      auto r = rest.Post("/openapi/v1/trainjob", Job());
      INFO(r.body.dump());
      REQUIRE(r.http_status == 200);
      const std::string id = r.body["data"]["jobId"];
      REQUIRE(jc::testing::WaitUntil([&] {
        return rest.Get("/openapi/v1/trainjob/" + id).body["data"].value("status", "") == "completed";
      }));
    }
    std::string said;
    REQUIRE(jc::testing::WaitUntil([&] {
      said = Planned(rest);
      return said.find("median of 3 runs") != std::string::npos;
    }));
  }
  // Killed at once: no orderly shutdown writes anything more.
  server.process->Signal(SIGKILL);
  REQUIRE(server.process->Wait().has_value());
  auto again = jc::testing::StartServerProcess(JC_SERVER_BINARY, dir.string(), "e2e_durations", "server2.log");
  jc::testing::RestClient rest(again.rest_port, token);
  std::string said;
  bool known = jc::testing::WaitUntil([&] {
    said = Planned(rest);
    return said.find("median of 3 runs") != std::string::npos;
  });
  INFO(said);
  CHECK(known);
  again.process.reset();
  adapter.reset();
  std::filesystem::remove_all(dir);
}
