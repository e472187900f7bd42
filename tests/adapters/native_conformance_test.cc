// The conformance kit against the native adapter, over a real nexec master and agent on
// loopback (real processes).

#include <unistd.h>

#include <filesystem>

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>

#include "absl/strings/numbers.h"
#include "adapters/native/nexec_backend.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "adapters/sdk/conformance/conformance.h"
#include "tests/testing/munge_daemon.h"
#include "tests/testing/process.h"

namespace jc::adapter::conformance {
namespace {

struct NexecCluster {
  std::filesystem::path dir;
  std::unique_ptr<jc::testing::Process> master;
  std::unique_ptr<jc::testing::Process> agent;
  std::string address;
  std::string error;

  NexecCluster() {
    jc::testing::UsePrivateMunged();  // the master, agent and backend all sign with it
    dir = std::filesystem::temp_directory_path() / ("jc-native-adapter-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    master = std::make_unique<jc::testing::Process>(
        std::vector<std::string>{JC_NEXEC_MASTER, "--listen=127.0.0.1:0", "--metrics_address=",
                                 "--data_dir=" + (dir / "data").string(),},
        (dir / "master.log").string());
    auto port = master->WaitForLog(R"(nexec master listening on port (\d+))");
    if (!port) {
      error = "nexec-master did not start: " + master->Log();
      return;
    }
    address = "127.0.0.1:" + *port;
    agent = std::make_unique<jc::testing::Process>(
        std::vector<std::string>{JC_NEXEC_AGENT, "--master=" + address, "--host=node1",
                                 "--resources=cpus=16,gpus=2,mem=32G", "--state_dir=" + (dir / "agent-state").string()},
        (dir / "agent.log").string());
    NexecBackend probe(address, "", nexec::MungeAuth::Munge(""));
    bool up = jc::testing::WaitUntil([&] {
      auto info = probe.Describe();
      return info.ok() && info->capacity().cpu() == 16;
    });
    if (!up) error = "the nexec agent did not join: " + agent->Log();
  }
  ~NexecCluster() {
    agent.reset();
    master.reset();
    std::filesystem::remove_all(dir);
  }
};

NexecCluster& Cluster() {
  static NexecCluster cluster;
  return cluster;
}

}  // namespace

ConformanceTarget MakeConformanceTarget() {
  NexecCluster& cluster = Cluster();
  ConformanceTarget t;
  t.name = "native (nexec) adapter";
  t.unavailable = cluster.error;
  std::string address = cluster.address;
  t.make_backend = [address] { return std::make_unique<NexecBackend>(address, "", nexec::MungeAuth::Munge("")); };
  t.center = *ParseCenterConfig(R"(
center_id: native-test
security_grade: 3
specs:
  - {id: small, cpu: 1, memory: 512Mi}
  - {id: gpu-1x, cpu: 4, memory: 4Gi, gpu: 1}
)");
  t.spec_id = "small";
  return t;
}

TEST_CASE("native adapter: a federation job's project reaches nexec as the job's -P, so a center's limits over "
          "projects count it",
          "[B7][A14]") {
  NexecCluster& cluster = Cluster();
  REQUIRE(cluster.error.empty());
  NexecBackend backend(cluster.address, "", nexec::MungeAuth::Munge(""));
  ReplicaLaunch launch;
  launch.name = "jc-project-0-0-0";
  launch.command = "true";
  launch.project = "climate";
  launch.spec.mutable_quantity()->set_cpu(1);
  auto id = backend.Submit(launch);
  REQUIRE(id.ok());
  int64_t job_id = 0;
  REQUIRE(absl::SimpleAtoi(*id, &job_id));
  auto stub = ::nexec::v1::Master::NewStub(grpc::CreateChannel(cluster.address, grpc::InsecureChannelCredentials()));
  ::nexec::v1::JobRef ref;
  ref.set_job_id(job_id);
  ::nexec::v1::Job job;
  grpc::ClientContext ctx;
  REQUIRE(nexec::MungeAuth::Munge("").Sign(&ctx, "GetJob", ref).ok());
  REQUIRE(stub->GetJob(&ctx, ref, &job).ok());
  CHECK(job.spec().project() == "climate");
}

}  // namespace jc::adapter::conformance
