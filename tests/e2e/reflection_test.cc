// gRPC server reflection on every server (SPEC C8): the real binaries, asked as grpcurl
// asks them (`list`, `describe`), with a client built from reflection.proto.

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/testing/process.h"
#include "tests/testing/reflection/reflection_client.h"
#include "tests/testing/rest_client.h"

using jc::testing::Process;

namespace {

std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("jc-reflect-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::shared_ptr<grpc::Channel> Channel(const std::string& port) {
  return grpc::CreateChannel("127.0.0.1:" + port, grpc::InsecureChannelCredentials());
}

bool Has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("the control plane's gRPC server lists and describes its services by reflection", "[C8]") {
  const std::string dir = TempDir("server");
  Process server({JC_SERVER_BINARY, "--rest_address=127.0.0.1:0", "--grpc_address=127.0.0.1:0",
                  "--admin_address=127.0.0.1:0", "--data_dir=" + dir, "--admin_token_file=" + dir + "/admin.token"},
                 dir + "/server.log");
  auto port = server.WaitForLog(R"(grpc listening on port (\d+))");
  INFO(server.Log());
  REQUIRE(port.has_value());
  const std::map<std::string, std::string> bearer{
      {"authorization", "Bearer " + jc::testing::AdminToken(dir + "/admin.token")}};

  auto services = jc::testing::ListServicesByReflection(Channel(*port), bearer);
  INFO(services.status().ToString());
  REQUIRE(services.ok());
  for (const char* name : {"jointcloud.v1.JobService", "jointcloud.v1.RegistryService", "jointcloud.v1.CatalogService",
                           "jointcloud.v1.SchedulerService", "grpc.health.v1.Health"}) {
    INFO(name);
    CHECK(Has(*services, name));
  }
  auto methods = jc::testing::DescribeServiceByReflection(Channel(*port), "jointcloud.v1.JobService", bearer);
  INFO(methods.status().ToString());
  REQUIRE(methods.ok());
  CHECK(Has(*methods, "CreateTrainJob"));
  CHECK(Has(*methods, "GetTrainJob"));

  // The API's shape is public, as the OpenAPI document is: no credentials needed.
  auto anonymous = jc::testing::ListServicesByReflection(Channel(*port));
  INFO(anonymous.status().ToString());
  CHECK(anonymous.ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("the nexec master and agent, and an adapter, list and describe their services by reflection", "[C8][B11]") {
  const std::string dir = TempDir("nexec");
  Process master({JC_NEXEC_MASTER, "--listen=127.0.0.1:0", "--data_dir=" + dir + "/master", "--auth=none"},
                 dir + "/master.log");
  auto master_port = master.WaitForLog(R"(nexec master listening on port (\d+))");
  INFO(master.Log());
  REQUIRE(master_port.has_value());
  auto listed = jc::testing::ListServicesByReflection(Channel(*master_port));
  INFO(listed.status().ToString());
  REQUIRE(listed.ok());
  CHECK(Has(*listed, "nexec.v1.Master"));
  auto methods = jc::testing::DescribeServiceByReflection(Channel(*master_port), "nexec.v1.Master");
  REQUIRE(methods.ok());
  CHECK(Has(*methods, "Submit"));
  CHECK(Has(*methods, "RunTask"));

  Process agent({JC_NEXEC_AGENT, "--master=127.0.0.1:" + *master_port, "--host=node1", "--resources=cpus=1,mem=1G",
                 "--listen=127.0.0.1:0", "--auth=none", "--state_dir=" + dir + "/agent"},
                dir + "/agent.log");
  auto agent_port = agent.WaitForLog(R"(listening on 127\.0\.0\.1:(\d+))");
  INFO(agent.Log());
  REQUIRE(agent_port.has_value());
  auto agent_services = jc::testing::ListServicesByReflection(Channel(*agent_port));
  REQUIRE(agent_services.ok());
  CHECK(Has(*agent_services, "nexec.v1.Agent"));

  std::ofstream(dir + "/center.yaml") << "center_id: local\nrun_as: {default: nobody}\n";
  Process adapter({JC_ADAPTER_LOCAL, "--listen=127.0.0.1:0", "--plaintext", "--metrics_address=", "--state_dir=" + dir + "/adapter",
                   "--work_dir=" + dir + "/replicas", "--center_config=" + dir + "/center.yaml"},
                  dir + "/adapter.log");
  auto adapter_port = adapter.WaitForLog(R"(listening on port (\d+))");
  INFO(adapter.Log());
  REQUIRE(adapter_port.has_value());
  auto adapter_services = jc::testing::ListServicesByReflection(Channel(*adapter_port));
  INFO(adapter_services.status().ToString());
  REQUIRE(adapter_services.ok());
  CHECK(Has(*adapter_services, "jointcloud.adapter.v1.Adapter"));
  std::filesystem::remove_all(dir);
}
