// The conformance kit against the native adapter, over a real nexec master and agent on
// loopback (real processes).

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "adapters/native/nexec_backend.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "adapters/sdk/conformance/conformance.h"
#include "adapters/sdk/adapter_core.h"
#include "adapters/sdk/run_adapter.h"
#include "tests/testing/oci_registry.h"
#include "tests/testing/munge_daemon.h"
#include "tests/testing/process.h"
#include "tests/testing/sdk_adapter.h"
#include "tests/testing/test_account.h"

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
    // A replica's image pull (nexec-image-run, a task process that outlives a killed agent by
    // design) may still be writing its temporary file here: retry until the tree is gone.
    jc::testing::WaitUntil([&] {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      return !ec;
    });
  }
};

NexecCluster& Cluster() {
  static NexecCluster cluster;
  return cluster;
}

// The nexec job `external_id` names, read from the master as root.
::nexec::v1::Job JobAt(const NexecCluster& cluster, const std::string& external_id) {
  int64_t job_id = 0;
  REQUIRE(absl::SimpleAtoi(external_id, &job_id));
  auto stub = ::nexec::v1::Master::NewStub(grpc::CreateChannel(cluster.address, grpc::InsecureChannelCredentials()));
  ::nexec::v1::JobRef ref;
  ref.set_job_id(job_id);
  ::nexec::v1::Job job;
  grpc::ClientContext ctx;
  REQUIRE(nexec::MungeAuth::Munge("").Sign(&ctx, "GetJob", ref).ok());
  REQUIRE(stub->GetJob(&ctx, ref, &job).ok());
  return job;
}

}  // namespace

ConformanceTarget MakeConformanceTarget() {
  NexecCluster& cluster = Cluster();
  ConformanceTarget t;
  t.runs_commands = true;  // nexec's agent runs it (nexec exec)
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
  CHECK(JobAt(cluster, *id).spec().project() == "climate");
}

TEST_CASE("native adapter: a replica's image reaches nexec as the job's --image, by digest, and a gang names "
          "one image [A14]",
          "[A14]") {
  NexecCluster& cluster = Cluster();
  REQUIRE(cluster.error.empty());
  NexecBackend backend(cluster.address, "", nexec::MungeAuth::Munge(""));
  CHECK(backend.RunsImages());
  const std::string image = "registry.example.test/demo/app@sha256:" + std::string(64, 'a');
  ReplicaLaunch launch;
  launch.name = "jc-imaged-0-0-0";
  launch.command = "true";
  launch.image = image;
  launch.spec.mutable_quantity()->set_cpu(1);
  auto id = backend.Submit(launch);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  CHECK(JobAt(cluster, *id).spec().image() == image);
  ReplicaLaunch other = launch;
  other.name = "jc-imaged-0-1-0";
  other.image = "";
  launch.name = "jc-imaged-0-2-0";
  auto gang = backend.SubmitGang({launch, other});
  REQUIRE(absl::IsInvalidArgument(gang.status()));
}

TEST_CASE("native adapter: the images its hosts hold are reported as present at the center, by digest (issue 30 "
          "item 5) [A4]",
          "[A4]") {
  NexecCluster& cluster = Cluster();
  REQUIRE(cluster.error.empty());
  NexecBackend backend(cluster.address, "", nexec::MungeAuth::Munge(""));
  const std::string hex(64, 'd');
  auto present = [&] {
    auto info = backend.Describe();
    return info.ok() && std::find(info->image_digests().begin(), info->image_digests().end(), "sha256:" + hex) !=
                            info->image_digests().end();
  };
  CHECK_FALSE(present());
  // As a pull leaves an image in the agent's store (nexec-image-run): its directory, then
  // `ready`. Half-pulled images do not count.
  const auto image = cluster.dir / "agent-state" / "images" / hex;
  std::filesystem::create_directories(image / "rootfs");
  std::filesystem::create_directories(cluster.dir / "agent-state" / "images" / ".pull.x");
  std::ofstream(image / "ready").flush();
  CHECK(jc::testing::WaitUntil(present));
  std::filesystem::remove_all(image);  // evicted: no longer present
  CHECK(jc::testing::WaitUntil([&] { return !present(); }));
}

TEST_CASE("native adapter: a center with its own registry is given an image by a copy there by digest, and its "
          "replicas then pull it from there (issue 30 item 5) [A4]",
          "[A4]") {
  NexecCluster& cluster = Cluster();
  REQUIRE(cluster.error.empty());
  const auto dir = cluster.dir / "mirror-test";
  auto source = jc::testing::OciRegistry::Start((dir / "source").string(), JC_SOURCE_DIR);
  auto mirror = jc::testing::OciRegistry::Start((dir / "mirror").string(), JC_SOURCE_DIR);
  REQUIRE(source.ok());
  REQUIRE(mirror.ok());
  auto digest = (*source)->Push("ai/torch", "v2", "a framework image");
  REQUIRE(digest.ok());
  const std::string image = (*source)->host() + "/ai/torch@" + *digest;
  auto ca_dir = [](const jc::testing::OciRegistry& r) {
    return std::filesystem::path(r.ca_file()).parent_path().string();
  };
  auto center = ParseCenterConfig(absl::StrCat(R"(
center_id: mirrored
specs:
  - {id: small, cpu: 1, memory: 256Mi}
image_mirror:
  registry: )", (*mirror)->host(), "/jc", R"(
  auth_file: )", (*mirror)->auth_file(), R"(
  cert_dir: )", ca_dir(**mirror), R"(
  source_auth_file: )", (*source)->auth_file(), R"(
  source_cert_dir: )", ca_dir(**source), "\n"));
  INFO(center.status().ToString());
  REQUIRE(center.ok());
  NexecBackend backend(cluster.address, "", nexec::MungeAuth::Munge(""));
  AdapterOptions o;
  o.listen = "127.0.0.1:0";
  o.metrics_address = "";
  o.state_dir = (dir / "adapter").string();
  o.center = *center;
  auto server = AdapterServer::Start(&backend, o);
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  AdapterCore& core = (*server)->core();
  auto info = core.Info();
  REQUIRE(info.ok());
  CHECK(info->receives_images());  // it can be given images: by a copy into its registry

  pb::StageImageRequest stage;
  stage.set_image_id("torch");
  stage.set_name("torch");
  stage.set_image(image);
  auto staged = core.StageImage(stage);
  INFO(staged.status().ToString());
  REQUIRE(staged.ok());
  CHECK(staged->source_url() == image);
  // The mirror serves it under the same digest.
  const std::string copy = (*mirror)->host() + "/jc/ai/torch@" + *digest;
  CHECK(std::system(("skopeo inspect --raw --cert-dir " + ca_dir(**mirror) + " --authfile " + (*mirror)->auth_file() +
                     " docker://" + copy + " >/dev/null").c_str()) == 0);

  // A replica naming the image is handed to nexec with the mirror's reference.
  pb::SubmitReplicaRequest req;
  req.mutable_key()->set_job_id(absl::StrCat("mirror", getpid()));
  req.set_command("true");
  req.set_image_id("torch");
  req.set_image(image);
  req.set_resource_spec_id("small");
  auto replica = core.Submit(req);
  INFO(replica.status().ToString());
  REQUIRE(replica.ok());
  CHECK(JobAt(cluster, replica->external_id()).spec().image() == copy);

  // A restarted adapter still hands out the mirror's copy (it finds it there).
  (*server)->Shutdown();
  server->reset();
  auto restarted = AdapterServer::Start(&backend, o);
  REQUIRE(restarted.ok());
  req.mutable_key()->set_job_id(absl::StrCat("mirror-again", getpid()));
  replica = (*restarted)->core().Submit(req);
  INFO(replica.status().ToString());
  REQUIRE(replica.ok());
  CHECK(JobAt(cluster, replica->external_id()).spec().image() == copy);
  // One the mirror does not hold goes out with its source's reference.
  auto other = (*source)->Push("ai/other", "v1", "not mirrored");
  REQUIRE(other.ok());
  pb::SubmitReplicaRequest unmirrored = req;
  unmirrored.mutable_key()->set_job_id(absl::StrCat("unmirrored", getpid()));
  unmirrored.set_image((*source)->host() + "/ai/other@" + *other);
  replica = (*restarted)->core().Submit(unmirrored);
  REQUIRE(replica.ok());
  CHECK(JobAt(cluster, replica->external_id()).spec().image() == unmirrored.image());
  server = std::move(restarted);
  AdapterCore& again = (*server)->core();

  // A source the mirror cannot reach: the stage fails with skopeo's reason.
  pb::StageImageRequest gone = stage;
  gone.set_image("127.0.0.1:1/ai/torch@" + *digest);
  auto failed = again.StageImage(gone);
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(std::string(failed.status().message()), Catch::Contains("cannot copy image 127.0.0.1:1/ai/torch@"));
  (*server)->Shutdown();
}

TEST_CASE("native adapter: a spec's nexec shape asks for no more memory than the spec, a slot per GPU [A3]",
          "[A3]") {
  auto shape = [](double cpu, int64_t memory_mb, int gpu) {
    pb::SpecOffer spec;
    spec.mutable_quantity()->set_cpu(cpu);
    spec.mutable_quantity()->set_memory_mb(memory_mb);
    spec.mutable_quantity()->set_gpu(gpu);
    return ShapeForSpec(spec);
  };
  // A spec the size of a 61,036 MB host: rounded up per slot it asked for 61,038 MB on one
  // host and waited for ever; rounded down it fits.
  NexecShape whole = shape(3, 61036, 0);
  CHECK(whole.slots == 3);
  CHECK(whole.requirement == "rusage[mem=20345] span[hosts=1]");
  // Memory per slot of the final slots: one CPU and two GPUs is two slots, 8 GiB each (it
  // reserved 16 GiB a slot, 32 GiB in all, before).
  NexecShape gpus = shape(1, 16384, 2);
  CHECK(gpus.slots == 2);
  CHECK(gpus.requirement == "2{rusage[mem=8192,gpu=1]}");
  NexecShape mixed = shape(8, 65536, 1);
  CHECK(mixed.slots == 8);
  CHECK(mixed.requirement == "1{rusage[mem=8192,gpu=1]} 7{rusage[mem=8192]}");
  CHECK(shape(2, 0, 0).requirement == "span[hosts=1]");
  CHECK(shape(4, 3, 0).requirement == "rusage[mem=1] span[hosts=1]");  // a limit still, not none
}

TEST_CASE("native adapter: a replica pending in nexec is in the center's usage from the moment its submit was "
          "answered [A14][A3]",
          "[A14][A3]") {
  // The control plane drops its reservation for a replica once a usage measured after the
  // submit was answered arrives: a replica queued at the center, holding no host yet, that
  // usage left out made a busy center look free, and it was over-filled (docs/adapter-sdk.md,
  // GetUsage). The SDK counts its own replicas not yet seen running.
  NexecCluster& cluster = Cluster();
  REQUIRE(cluster.error.empty());
  NexecBackend backend(cluster.address, "", nexec::MungeAuth::Munge(""));
  jc::testing::SdkAdapter adapter(&backend, R"(
center_id: native-pending
security_grade: 3
specs:
  - {id: fill, cpu: 1, memory: 512Mi}
  - {id: whole, cpu: 16, memory: 4Gi, gpu: 2}
)",
                                  cluster.dir, "pending");
  AdapterCore& core = adapter.core();
  auto submit = [&](const std::string& job, const std::string& spec) { return adapter.Submit(job, spec); };
  const pb::ReplicaKey filler = submit("fill", "fill");
  REQUIRE(jc::testing::WaitUntil([&] {
    auto r = core.Get(filler);
    return r.ok() && r->state() == pb::REPLICA_RUNNING;
  }));
  // Every slot of the node (16), both GPUs and 4 GiB: it waits while the filler runs.
  const pb::ReplicaKey queued = submit("whole", "whole");
  auto usage = core.Usage();
  REQUIRE(usage.ok());
  INFO(usage->DebugString());
  auto seen = core.Get(queued);
  REQUIRE(seen.ok());
  CHECK(seen->state() == pb::REPLICA_PENDING);
  CHECK(usage->used().cpu() == 16);  // the filler's slot and the queued replica's 16, up to the node's
  CHECK(usage->free().cpu() == 0);
  CHECK(usage->used().gpu() == 2);
  CHECK(usage->free().gpu() == 0);
  CHECK(usage->used().memory() >= 4096);
  // Once it left, its slots are free again.
  CHECK(core.StopReplica(queued).ok());
  REQUIRE(jc::testing::WaitUntil([&] {
    usage = core.Usage();
    return usage.ok() && usage->free().cpu() == 15;
  }));
  // What the running filler holds is its slot and its memory (nexec's host listing counts
  // the memory its running jobs reserve).
  CHECK(usage->used().cpu() == 1);
  CHECK(usage->used().memory() == 512);
  CHECK(core.StopReplica(filler).ok());
  CHECK(jc::testing::WaitUntil([&] {
    usage = core.Usage();
    return usage.ok() && usage->free().cpu() == 16 && usage->used().memory() == 0;
  }));
}

TEST_CASE("native adapter: a replica that ended says what it used, as nexec measured it (issue 31 item 1) [A14]",
          "[A14]") {
  NexecCluster& cluster = Cluster();
  REQUIRE(cluster.error.empty());
  NexecBackend backend(cluster.address, "", nexec::MungeAuth::Munge(""));
  ReplicaLaunch launch;
  launch.key.set_job_id(absl::StrCat("usage", getpid()));
  launch.name = absl::StrCat("jc-usage-", getpid(), "-0-0-0");
  // A fixed amount of CPU work (a tenth of a second or more here, whatever else the
  // machine runs meanwhile), then a short sleep: wall time and CPU time both show.
  launch.command = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; sleep 0.3";
  launch.spec.mutable_quantity()->set_cpu(1);
  auto id = backend.Submit(launch);
  REQUIRE(id.ok());
  ReplicaObservation ended;
  REQUIRE(jc::testing::WaitUntil(
      [&] {
        auto seen = backend.Poll({*id});
        if (!seen.ok() || !seen->contains(*id)) return false;
        ended = seen->at(*id);
        return ended.state == pb::REPLICA_SUCCEEDED || ended.state == pb::REPLICA_FAILED;
      },
      std::chrono::seconds(30)));
  CHECK(ended.state == pb::REPLICA_SUCCEEDED);
  REQUIRE(ended.usage.has_value());
  INFO(ended.usage->DebugString());
  CHECK(ended.usage->wall_seconds() >= 0.3);
  CHECK(ended.usage->cpu_seconds() >= 0.05);
  CHECK(ended.usage->cpu_seconds() <= ended.usage->wall_seconds() + 0.05);
  CHECK(ended.usage->gpus() == 0);
  REQUIRE(ended.started_at.has_value());
  REQUIRE(ended.ended_at.has_value());
  CHECK(*ended.ended_at > *ended.started_at);
}

TEST_CASE("native adapter: an account that takes a replica's name and key first hijacks nothing: the replica "
          "runs its own command in a job of its own [A14][C6]",
          "[A14][C6]") {
  if (geteuid() != 0) {
    WARN("not run: the attack needs a second account (CI runs as root)");
    return;
  }
  NexecCluster& cluster = Cluster();
  REQUIRE(cluster.error.empty());
  jc::testing::TestAccount squatter("jc-squat");
  const std::string name = "jc-squatted-0-0-0";
  // The squatter submits, as itself (munge proves it), a job with the replica's coming name
  // as both its name and its key.
  ::nexec::v1::SubmitRequest squat;
  squat.mutable_spec()->set_name(name);
  squat.mutable_spec()->set_submit_key(name);
  squat.mutable_spec()->set_user(squatter.name);
  squat.mutable_spec()->set_command("echo hijacked; sleep 30");
  const std::string cred_file = (cluster.dir / "squat.cred").string();
  jc::testing::Process munge({"/usr/sbin/runuser", "-u", squatter.name, "--", "/usr/bin/munge",
                              "--socket=" + jc::testing::UsePrivateMunged(),
                              "--string=" + nexec::MungeAuth::Payload("Submit", squat)},
                             cred_file);
  REQUIRE(munge.Wait() == 0);
  std::stringstream cred;
  cred << std::ifstream(cred_file).rdbuf();
  std::string credential = cred.str();
  while (!credential.empty() && std::isspace(static_cast<unsigned char>(credential.back()))) credential.pop_back();
  auto stub = ::nexec::v1::Master::NewStub(grpc::CreateChannel(cluster.address, grpc::InsecureChannelCredentials()));
  ::nexec::v1::SubmitResponse squatted;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata(nexec::kMungeMetadataKey, credential);
    grpc::Status s = stub->Submit(&ctx, squat, &squatted);
    INFO(s.error_message());
    REQUIRE(s.ok());
  }

  // The adapter submits the replica under that name: it gets a job of its own, running the
  // replica's command, and the same again when it repeats the submit (after a crash).
  NexecBackend backend(cluster.address, "", nexec::MungeAuth::Munge(""));
  ReplicaLaunch launch;
  launch.name = name;
  launch.command = "echo the replicas own";
  launch.spec.mutable_quantity()->set_cpu(1);
  auto id = backend.Submit(launch);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  CHECK(*id != std::to_string(squatted.job_id()));
  auto again = backend.Submit(launch);
  REQUIRE(again.ok());
  CHECK(*again == *id);
  const ::nexec::v1::Job job = JobAt(cluster, *id);
  CHECK(job.spec().command() == "echo the replicas own");
  CHECK(job.spec().submitter() == "root");
  // The squatter's job is no replica: ended here (once its task has started).
  ::nexec::v1::JobRef theirs;
  theirs.set_job_id(squatted.job_id());
  CHECK(jc::testing::WaitUntil([&] {
    grpc::ClientContext kill_ctx;
    if (!nexec::MungeAuth::Munge("").Sign(&kill_ctx, "Kill", theirs).ok()) return false;
    ::nexec::v1::ControlResponse killed;
    return stub->Kill(&kill_ctx, theirs, &killed).ok();
  }));
}

}  // namespace jc::adapter::conformance
