// The conformance kit against the Slurm adapter, over a real Slurm cluster (munged,
// slurmctld, slurmd from Debian's packages) that scripts/test.sh starts on loopback with
// scripts/slurm.sh and names in JC_TEST_SLURM_CONF. Without it these tests fail, saying
// why: a missing cluster is never green.

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "adapters/sdk/conformance/conformance.h"
#include "adapters/sdk/center_config.h"
#include "adapters/sdk/adapter_core.h"
#include "adapters/sdk/run_adapter.h"
#include "adapters/slurm/command.h"
#include "adapters/sdk/exec_session.h"
#include "adapters/slurm/slurm_backend.h"
#include "common/exec/exec_stream.h"
#include "tests/testing/oci_registry.h"
#include "tests/testing/process.h"
#include "tests/testing/sdk_adapter.h"
#include "tests/testing/test_account.h"

namespace jc::adapter::conformance {
namespace {

struct SlurmCluster {
  std::string error;
  std::filesystem::path log_dir;

  SlurmCluster() {
    const char* conf = std::getenv("JC_TEST_SLURM_CONF");
    if (conf == nullptr || *conf == '\0') {
      const char* why = std::getenv("JC_TEST_SLURM_UNAVAILABLE");
      error = why != nullptr && *why != '\0'
                  ? absl::StrCat("the test script could not start Slurm: ", why)
                  : "JC_TEST_SLURM_CONF is not set; scripts/test.sh starts a throwaway Slurm "
                    "(scripts/slurm.sh start DIR, as root) and sets it";
      return;
    }
    setenv("SLURM_CONF", conf, 1);
    auto probe = RunCommand({"sinfo", "-h", "-o", "%T"}, absl::Seconds(10));
    if (!probe.ok()) {
      error = std::string(probe.status().message());
    } else if (probe->exit_code != 0) {
      error = absl::StrCat("sinfo against ", conf, " failed: ", probe->err);
    }
    log_dir = std::filesystem::temp_directory_path() / ("jc-slurm-adapter-" + std::to_string(getpid()));
    // Replicas run as the accounts run_as maps to, and Slurm writes their output as them:
    // the log directory is theirs to write, as /tmp is (docs/operations.md).
    std::filesystem::create_directories(log_dir);
    std::filesystem::permissions(log_dir, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
  }
  ~SlurmCluster() {
    std::error_code ec;
    std::filesystem::remove_all(log_dir, ec);
  }
  SlurmOptions Options() const {
    SlurmOptions o;
    o.log_dir = log_dir.string();
    return o;
  }
};

SlurmCluster& Cluster() {
  static SlurmCluster cluster;
  return cluster;
}

}  // namespace

ConformanceTarget MakeConformanceTarget() {
  ConformanceTarget t;
  t.runs_commands = true;  // srun --overlap in its allocation
  t.name = "Slurm adapter";
  t.unavailable = Cluster().error;
  SlurmOptions options = Cluster().Options();
  t.make_backend = [options] { return std::make_unique<SlurmBackend>(options); };
  t.center = *ParseCenterConfig(R"(
center_id: slurm-test
security_grade: 2
specs:
  - {id: small, cpu: 1, memory: 512Mi}
  - {id: gpu-2x, cpu: 2, memory: 1Gi, gpu: 2}
)");
  t.spec_id = "small";
  return t;
}

namespace {

TEST_CASE("Slurm adapter: a spec becomes cpus, memory and gres/gpu, and usage counts them [A14][A3]",
          "[A14][slurm]") {
  if (!Cluster().error.empty()) FAIL("Slurm cannot be tested here: " << Cluster().error);
  SlurmBackend backend(Cluster().Options());
  ReplicaLaunch launch;
  launch.key.set_job_id(absl::StrCat("spec", getpid(), "x", absl::ToUnixMillis(absl::Now())));
  launch.name = ReplicaName(launch.key);
  launch.command = "echo \"gpus=$CUDA_VISIBLE_DEVICES cpus=$SLURM_CPUS_PER_TASK mem=$SLURM_MEM_PER_NODE\"; sleep 30";
  launch.spec.set_resource_spec_id("gpu-2x");
  launch.spec.mutable_quantity()->set_cpu(2);
  launch.spec.mutable_quantity()->set_memory_mb(1024);
  launch.spec.mutable_quantity()->set_gpu(2);
  auto id = backend.Submit(launch);
  REQUIRE(id.ok());
  // A repeated submit (an adapter that crashed after sbatch) finds the same job.
  auto again = backend.Submit(launch);
  REQUIRE(again.ok());
  CHECK(*again == *id);

  std::string out;
  bool printed = jc::testing::WaitUntil(
      [&] {
        out = backend.ReadLog(*id, false, 0, 4096).value_or("");
        return absl::StrContains(out, "mem=");
      },
      std::chrono::seconds(60));
  INFO("output: " << out);
  REQUIRE(printed);
  CHECK(absl::StrContains(out, "gpus=0,1 "));  // two of the node's GPU devices
  CHECK(absl::StrContains(out, "cpus=2 "));
  CHECK(absl::StrContains(out, "mem=1024"));

  auto usage = backend.GetUsage();
  REQUIRE(usage.ok());
  CHECK(usage->running_task_num() >= 1);
  CHECK(usage->used().gpu() >= 2);
  CHECK(usage->used().cpu() >= 2);
  CHECK(usage->used().memory() >= 1024);
  auto info = backend.Describe();
  REQUIRE(info.ok());
  CHECK(usage->used().gpu() + usage->free().gpu() == info->capacity().gpu());

  REQUIRE(backend.Stop(*id).ok());
  ReplicaObservation seen;
  bool stopped = jc::testing::WaitUntil(
      [&] {
        auto polled = backend.Poll({*id});
        if (!polled.ok() || !polled->count(*id)) return false;
        seen = polled->at(*id);
        return seen.state == pb::REPLICA_STOPPED;
      },
      std::chrono::seconds(60));
  INFO("last seen: " << pb::ReplicaState_Name(seen.state) << " " << seen.message);
  CHECK(stopped);
}

TEST_CASE("Slurm adapter: an account that names a job after a coming replica hijacks nothing: the replica runs "
          "in a job of its own, found again after a crash by the adapter's tag [A14][C6]",
          "[A14][C6][slurm]") {
  if (!Cluster().error.empty()) FAIL("Slurm cannot be tested here: " << Cluster().error);
  if (geteuid() != 0) {
    WARN("not run: the attack needs a second account (CI runs as root)");
    return;
  }
  jc::testing::TestAccount squatter("jc-slurm-squat");
  SlurmBackend backend(Cluster().Options());
  ReplicaLaunch launch;
  launch.key.set_job_id(absl::StrCat("squat", getpid(), "x", absl::ToUnixMillis(absl::Now())));
  launch.name = ReplicaName(launch.key);
  launch.command = "echo the replicas own";
  launch.spec.mutable_quantity()->set_cpu(1);
  launch.spec.mutable_quantity()->set_memory_mb(64);
  // The squatter submits first, as itself, under the replica's name (even with a comment
  // that looks like a tag).
  const std::string out = (Cluster().log_dir / ("squat-" + std::to_string(getpid()) + ".id")).string();
  jc::testing::Process squat({"/usr/sbin/runuser", "-u", squatter.name, "--", "/usr/bin/env",
                              "SLURM_CONF=" + std::string(std::getenv("SLURM_CONF")), "sbatch", "--parsable",
                              "--job-name=" + launch.name, "--comment=jc:00000000000000000000000000000000",
                              "--chdir=/tmp", "--output=/dev/null", "--wrap=echo hijacked; sleep 30"},
                             out);
  REQUIRE(squat.Wait() == 0);
  std::string squatted = squat.Log();
  while (!squatted.empty() && std::isspace(static_cast<unsigned char>(squatted.back()))) squatted.pop_back();
  squatted = squatted.substr(0, squatted.find(';'));
  REQUIRE_FALSE(squatted.empty());

  auto id = backend.Submit(launch);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  CHECK(*id != squatted);
  auto again = backend.Submit(launch);  // an adapter that crashed after sbatch
  REQUIRE(again.ok());
  CHECK(*again == *id);
  std::string log;
  CHECK(jc::testing::WaitUntil(
      [&] {
        log = backend.ReadLog(*id, false, 0, 4096).value_or("");
        return absl::StrContains(log, "the replicas own");
      },
      std::chrono::seconds(60)));
  INFO(log);
  CHECK_FALSE(absl::StrContains(log, "hijacked"));
  auto cancelled = RunCommand({"scancel", squatted}, absl::Seconds(10));
  CHECK((cancelled.ok() && cancelled->exit_code == 0));
}

TEST_CASE("Slurm adapter: a spec the cluster can never run is refused with Slurm's reason [A14][C5]",
          "[A14][slurm]") {
  if (!Cluster().error.empty()) FAIL("Slurm cannot be tested here: " << Cluster().error);
  SlurmBackend backend(Cluster().Options());
  ReplicaLaunch launch;
  launch.key.set_job_id(absl::StrCat("huge", getpid(), "x", absl::ToUnixMillis(absl::Now())));
  launch.name = ReplicaName(launch.key);
  launch.command = "true";
  launch.spec.mutable_quantity()->set_cpu(1);
  launch.spec.mutable_quantity()->set_gpu(99);  // the node has 8
  auto id = backend.Submit(launch);
  REQUIRE_FALSE(id.ok());
  CHECK(id.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(id.status().message(), "sbatch"));
  CHECK(absl::StrContains(id.status().message(), "not available"));
}

// A replica of spec "small" that sleeps five minutes on `cpus` CPUs, limited to `limit`.
ReplicaLaunch Sleeper(const std::string& job_id, int cpus, absl::Duration limit) {
  ReplicaLaunch l;
  l.key.set_job_id(job_id);
  l.name = ReplicaName(l.key);
  l.command = "sleep 300";
  l.spec.set_resource_spec_id("small");
  l.spec.mutable_quantity()->set_cpu(cpus);
  l.time_limit = limit;
  return l;
}

// A replica of one CPU, submitted and seen running (it holds its CPU for ten minutes).
std::string RunningFiller(SlurmBackend& backend, const std::string& job_id) {
  auto filler = backend.Submit(Sleeper(job_id, 1, absl::Minutes(10)));
  REQUIRE(filler.ok());
  REQUIRE(jc::testing::WaitUntil(
      [&] {
        auto seen = backend.Poll({*filler});
        return seen.ok() && seen->count(*filler) && seen->at(*filler).state == pb::REPLICA_RUNNING;
      },
      std::chrono::seconds(60)));
  return *filler;
}

TEST_CASE("Slurm adapter: a job that waits is withdrawn by scancel --state=PENDING and never runs, one that runs "
          "is left running [A16][slurm]",
          "[A16][slurm]") {
  if (!Cluster().error.empty()) FAIL("Slurm cannot be tested here: " << Cluster().error);
  SlurmBackend backend(Cluster().Options());
  auto usage = backend.GetUsage();
  REQUIRE(usage.ok());
  // The queued replica asks for every CPU of the node, so it cannot start while the one-CPU
  // filler runs, whatever else ends meanwhile (a job of an earlier test case freeing CPUs
  // once let a one-CPU "queued" replica start before it was withdrawn).
  const int node_cpus = static_cast<int>(usage->free().cpu() + usage->used().cpu());
  REQUIRE(node_cpus > 1);
  const std::string run = absl::StrCat("wd", getpid(), "x", absl::ToUnixMillis(absl::Now()));
  auto launch = [&](const std::string& what, int cpus) { return Sleeper(run + what, cpus, absl::Minutes(10)); };
  const std::string filler = RunningFiller(backend, run + "fill");
  auto queued = backend.Submit(launch("queued", node_cpus));
  REQUIRE(queued.ok());
  // The running filler: not taken back, still running.
  auto kept = backend.Withdraw(filler);
  INFO(kept.status().ToString());
  REQUIRE(kept.ok());
  CHECK_FALSE(*kept);
  auto seen = backend.Poll({filler});
  REQUIRE(seen.ok());
  CHECK(seen->at(filler).state == pb::REPLICA_RUNNING);
  // The queued one: taken back, and it never starts once the node frees.
  auto taken = backend.Withdraw(*queued);
  INFO(taken.status().ToString());
  REQUIRE(taken.ok());
  CHECK(*taken);
  CHECK(backend.Stop(filler).ok());
  auto after = backend.Poll({*queued});
  REQUIRE(after.ok());
  REQUIRE(after->count(*queued));
  CHECK(after->at(*queued).state == pb::REPLICA_STOPPED);
  CHECK((!after->at(*queued).started_at || (after->at(*queued).ended_at &&
                                            *after->at(*queued).started_at >= *after->at(*queued).ended_at)));
}

TEST_CASE("Slurm adapter: a replica queued in slurmctld is in the center's usage from the moment its submit was "
          "answered, and another account's queued job is not [A14][A3]",
          "[A14][A3][slurm]") {
  // The control plane drops its reservation for a replica once a usage measured after the
  // submit was answered arrives: a replica queued in slurmctld, holding no node yet, that
  // usage left out made a busy center look free, and it was over-filled (docs/adapter-sdk.md,
  // GetUsage). The SDK counts its own replicas not yet seen running; other accounts' queued
  // jobs are not counted (anyone may queue one sized to the cluster that never starts).
  if (!Cluster().error.empty()) FAIL("Slurm cannot be tested here: " << Cluster().error);
  SlurmBackend backend(Cluster().Options());
  auto before = backend.GetUsage();
  REQUIRE(before.ok());
  const int node_cpus = static_cast<int>(before->free().cpu() + before->used().cpu());
  REQUIRE(node_cpus > 1);
  jc::testing::SdkAdapter adapter(&backend, absl::StrCat(R"(
center_id: slurm-pending
security_grade: 2
specs:
  - {id: fill, cpu: 1, memory: 256Mi}
  - {id: whole, cpu: )", node_cpus, R"(, memory: 1Gi, gpu: 2}
)"),
                                  Cluster().log_dir, "pu");
  AdapterCore& core = adapter.core();
  auto submit = [&](const std::string& job, const std::string& spec) {
    return adapter.Submit(job, spec, "sleep 300", 600);
  };
  const pb::ReplicaKey filler = submit("fill", "fill");
  REQUIRE(jc::testing::WaitUntil(
      [&] {
        auto r = core.Get(filler);
        return r.ok() && r->state() == pb::REPLICA_RUNNING;
      },
      std::chrono::seconds(60)));
  // Every CPU of the node, two GPUs and a GiB: it waits while the filler runs.
  const pb::ReplicaKey queued = submit("whole", "whole");
  auto usage = core.Usage();
  REQUIRE(usage.ok());
  INFO(usage->DebugString());
  auto seen = core.Get(queued);
  REQUIRE(seen.ok());
  CHECK(seen->state() == pb::REPLICA_PENDING);
  CHECK(usage->used().cpu() == node_cpus);  // the filler's one and the queued replica's all, up to the node's
  CHECK(usage->free().cpu() == 0);
  CHECK(usage->used().gpu() >= 2);
  CHECK(usage->used().memory() >= 1024);
  CHECK(usage->used().gpu() + usage->free().gpu() == before->used().gpu() + before->free().gpu());
  REQUIRE(core.StopReplica(queued).ok());

  // Another account's job queued for the whole node, to start in a year: not the
  // federation's, not counted.
  auto foreign = RunCommand({"sbatch", "--parsable", "-o", "/dev/null", "--begin=now+365days", "-c",
                             std::to_string(node_cpus), "--wrap", "sleep 300"},
                            absl::Seconds(30));
  REQUIRE(foreign.ok());
  INFO("sbatch: " << foreign->out << foreign->err);
  REQUIRE(foreign->exit_code == 0);
  const std::string foreign_id(absl::StripAsciiWhitespace(foreign->out));
  bool free_again = jc::testing::WaitUntil(
      [&] {
        usage = core.Usage();
        return usage.ok() && usage->free().cpu() > 0;  // the stopped replica left; the foreign job is not counted
      },
      std::chrono::seconds(60));
  CHECK(free_again);
  CHECK(RunCommand({"scancel", foreign_id}, absl::Seconds(30)).ok());
  CHECK(core.StopReplica(filler).ok());
}

}  // namespace
}  // namespace jc::adapter::conformance

namespace jc::adapter::conformance {
namespace {

// The replica's output once Slurm ended its job; "" when it did not in a minute.
std::string OutputWhenEnded(SlurmBackend& backend, const std::string& id, pb::ReplicaState* state) {
  bool ended = jc::testing::WaitUntil(
      [&] {
        auto seen = backend.Poll({id});
        if (!seen.ok() || !seen->contains(id)) return false;
        *state = seen->at(id).state;
        return *state == pb::REPLICA_SUCCEEDED || *state == pb::REPLICA_FAILED;
      },
      std::chrono::seconds(90));
  if (!ended) return "";
  return backend.ReadLog(id, false, 0, 8192).value_or("") + backend.ReadLog(id, true, 0, 8192).value_or("");
}

// What a command planned by PlanExec printed and its exit status, run as the adapter runs
// it (the SDK's StartAttached and the exec stream), its input ended at once.
struct PlannedRun {
  std::string out, err;
  std::optional<int> exit;
};
PlannedRun RunPlan(const ExecPlan& plan, bool tty) {
  namespace es = jc::exec_stream;
  class Peer final : public es::ExecPeer {
   public:
    bool Started() override { return true; }
    bool Send(std::string bytes) override {
      std::lock_guard<std::mutex> lock(mu_);
      decoder_.Feed(bytes);
      while (auto f = decoder_.Next()) {
        if (f->type == es::Type::kStdout) run.out += f->payload;
        if (f->type == es::Type::kStderr) run.err += f->payload;
        if (f->type == es::Type::kExit) run.exit = es::ParseExit(f->payload);
      }
      if (run.exit.has_value()) cv_.notify_all();
      return true;
    }
    void Close() override {}
    bool Receive(std::string* bytes, bool*) override {
      if (!input_sent_) {
        input_sent_ = true;
        *bytes = es::Encode(es::Type::kStdinEnd, "");
        return true;
      }
      // The caller stays until the exit status came (or two minutes passed).
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::minutes(2), [&] { return run.exit.has_value(); });
      return false;
    }
    bool Cancelled() override { return false; }
    PlannedRun run;

   private:
    std::mutex mu_;
    std::condition_variable cv_;
    es::Decoder decoder_;
    bool input_sent_ = false;
  };
  Peer peer;
  auto started = StartAttached(plan, tty, 24, 80);
  if (!started.ok()) {
    peer.run.err = std::string(started.status().message());
    return peer.run;
  }
  es::PumpAttached(*started, peer, {});
  return peer.run;
}

TEST_CASE("Slurm adapter: a replica naming an image runs in it on the node, pulled there by digest, as its account "
          "(rootless for an unprivileged one), and never bare [A14][A4][B6]",
          "[A14][A4][slurm]") {
  if (!Cluster().error.empty()) FAIL("Slurm cannot be tested here: " << Cluster().error);
  if (geteuid() != 0) {
    WARN("not run: Slurm jobs for other accounts need root (CI runs as root)");
    return;
  }
  const auto dir = Cluster().log_dir.parent_path() / ("jc-slurm-images-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  auto registry = jc::testing::OciRegistry::Start((dir / "registry").string(), JC_SOURCE_DIR);
  INFO(registry.status().ToString());
  REQUIRE(registry.ok());
  auto digest = (*registry)->Push("demo/app", "v1", "inside the Slurm job's image");
  REQUIRE(digest.ok());
  // What the nodes have: the runner, the registry's credentials and CA, readable by every
  // account replicas run as.
  const auto shared = dir / "shared";
  std::filesystem::create_directories(shared / "certs");
  std::filesystem::copy_file(JC_IMAGE_RUNNER, shared / "nexec-image-run");
  std::filesystem::copy_file(std::filesystem::path(JC_IMAGE_RUNNER).parent_path() / "nexec-userns-exec",
                             shared / "nexec-userns-exec");
  std::filesystem::copy_file((*registry)->auth_file(), shared / "auth.json");
  std::filesystem::copy_file((*registry)->ca_file(), shared / "certs" / "ca.crt");
  for (const auto& p : {dir, shared, shared / "certs"}) {
    std::filesystem::permissions(p, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                        std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                        std::filesystem::perms::others_exec);
  }
  for (const auto& f : {shared / "nexec-image-run", shared / "nexec-userns-exec", shared / "auth.json",
                        shared / "certs" / "ca.crt"}) {
    std::filesystem::permissions(f, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                        std::filesystem::perms::others_read | std::filesystem::perms::others_exec |
                                        std::filesystem::perms::group_exec);
  }
  // The stores' directory is everyone's, as /var/tmp is (sticky): each account makes its own.
  std::filesystem::permissions(dir, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
  SlurmOptions options = Cluster().Options();
  options.image_runner = (shared / "nexec-image-run").string();
  options.userns_helper = (shared / "nexec-userns-exec").string();
  options.image_store = (dir / "store-%u").string();
  options.registry_auth_file = (shared / "auth.json").string();
  options.registry_cert_dir = (shared / "certs").string();
  SlurmBackend backend(options);
  CHECK(backend.RunsImages());
  const std::string image = (*registry)->host() + "/demo/app@" + *digest;
  auto launch_of = [&](const std::string& tag, const std::string& user) {
    ReplicaLaunch launch;
    launch.key.set_job_id(absl::StrCat("img", tag, getpid(), "x", absl::ToUnixMillis(absl::Now())));
    launch.name = ReplicaName(launch.key);
    launch.command = "cat /etc/jc-image; id -u; echo \"job=$SLURM_JOB_ID replica=$JC_REPLICA_NAME\"";
    launch.image = image;
    launch.user = user;
    launch.env["JC_PROBE"] = "from the replica";
    launch.spec.set_resource_spec_id("small");
    launch.spec.mutable_quantity()->set_cpu(1);
    launch.spec.mutable_quantity()->set_memory_mb(512);
    return launch;
  };

  // As root (the adapter's own account here): in a cgroup below the job's.
  ReplicaLaunch as_root = launch_of("root", "");
  auto id = backend.Submit(as_root);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  pb::ReplicaState state = pb::REPLICA_PENDING;
  std::string out = OutputWhenEnded(backend, *id, &state);
  INFO(out);
  CHECK(state == pb::REPLICA_SUCCEEDED);
  CHECK(absl::StrContains(out, "inside the Slurm job's image\n0\njob=" + *id + " replica=" + as_root.name + "\n"));
  CHECK(std::filesystem::exists(dir / "store-0" / digest->substr(7) / "ready"));

  // As an unprivileged account: rootless, the same user inside, its own store.
  jc::testing::TestAccount account("jc-slurm-img");
  ReplicaLaunch as_account = launch_of("user", account.name);
  id = backend.Submit(as_account);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  out = OutputWhenEnded(backend, *id, &state);
  INFO(out);
  CHECK(state == pb::REPLICA_SUCCEEDED);
  CHECK(absl::StrContains(out, "inside the Slurm job's image\n" + std::to_string(account.uid) + "\n"));
  const auto store = dir / ("store-" + std::to_string(account.uid));
  struct stat st {};
  REQUIRE(stat(store.c_str(), &st) == 0);
  CHECK(st.st_uid == account.uid);
  CHECK((st.st_mode & 0777) == 0700);

  // A command in its running replica (`jcctl job exec`, SPEC A17): a step of the job enters
  // its container — `runc exec` as root; as an ordinary account, rootless, nexec-userns-exec
  // --enter (runc exec cannot join the command's nested user namespace and the container's
  // others) — the image's files, the replica's account, its exit status, a terminal with -t.
  for (const std::string& user : {std::string(), account.name}) {
    ReplicaLaunch running = launch_of(user.empty() ? "execroot" : "execuser", user);
    running.command = "exec sleep 300";
    auto running_id = backend.Submit(running);
    INFO(running_id.status().ToString());
    REQUIRE(running_id.ok());
    ExecRequest request;
    request.external_id = *running_id;
    request.account = user;
    request.command = {"sh", "-c", "cat /etc/jc-image; id -u; echo replica=$JC_REPLICA_NAME; exit 3"};
    // Running, and its container up (the image is already in the store).
    PlannedRun in_image;
    bool ran = jc::testing::WaitUntil(
        [&] {
          auto plan = backend.PlanExec(request);
          if (!plan.ok()) return false;
          in_image = RunPlan(*plan, false);
          return in_image.exit == 3;
        },
        std::chrono::seconds(90));
    INFO(user << ": " << in_image.out << in_image.err);
    CHECK(ran);
    CHECK(absl::StartsWith(in_image.out, "inside the Slurm job's image\n" +
                                             std::to_string(user.empty() ? 0 : account.uid) + "\nreplica="));
    // Rootless, the command's environment is the replica's own (runc exec as root gives the
    // image's).
    if (!user.empty()) CHECK(absl::StrContains(in_image.out, "replica=" + running.name + "\n"));
    request.command = {"sh", "-c", "[ -t 0 ] && echo on-a-terminal; echo TERM=$TERM"};
    request.tty = true;
    auto tty_plan = backend.PlanExec(request);
    REQUIRE(tty_plan.ok());
    PlannedRun on_tty = RunPlan(*tty_plan, true);
    INFO(on_tty.out << on_tty.err);
    CHECK(on_tty.exit == 0);
    CHECK(absl::StrContains(on_tty.out, "on-a-terminal"));
    CHECK(absl::StrContains(on_tty.out, "TERM=xterm"));
    CHECK(backend.Stop(*running_id).ok());
  }

  // A store another account made first is refused: the job fails saying so, never
  // running anything from it.
  jc::testing::TestAccount victim("jc-slurm-vic");
  std::filesystem::create_directories(dir / ("store-" + std::to_string(victim.uid)));
  std::filesystem::permissions(dir / ("store-" + std::to_string(victim.uid)), std::filesystem::perms::all);
  id = backend.Submit(launch_of("squat", victim.name));
  REQUIRE(id.ok());
  out = OutputWhenEnded(backend, *id, &state);
  INFO(out);
  CHECK(state == pb::REPLICA_FAILED);
  CHECK(absl::StrContains(out, "is not this account's own"));
  CHECK_FALSE(absl::StrContains(out, "inside the Slurm job's image"));

  // With GPUs (Slurm's gres; here /dev/null stands for each): the node's /dev and driver
  // directory in the image, Slurm's CUDA_VISIBLE_DEVICES for the command.
  std::filesystem::create_directories(dir / "driver" / "bin");
  std::filesystem::create_directories(dir / "driver" / "lib64");
  std::ofstream(dir / "driver" / "bin" / "nvidia-smi") << "#!/bin/sh\necho \"GPU 0: from the node's driver\"\n";
  std::filesystem::permissions(dir / "driver" / "bin" / "nvidia-smi", std::filesystem::perms::all);
  for (const auto& p : {dir / "driver", dir / "driver" / "bin", dir / "driver" / "lib64"}) {
    std::filesystem::permissions(p, std::filesystem::perms::owner_all | std::filesystem::perms::others_read |
                                        std::filesystem::perms::others_exec | std::filesystem::perms::group_read |
                                        std::filesystem::perms::group_exec);
  }
  SlurmOptions gpu_options = options;
  gpu_options.cdi_spec_dirs = {(dir / "no-cdi").string()};
  gpu_options.gpu_driver_dir = (dir / "driver").string();
  SlurmBackend gpu_backend(gpu_options);
  ReplicaLaunch with_gpus = launch_of("gpus", account.name);
  with_gpus.command = "echo gpus=$CUDA_VISIBLE_DEVICES; nvidia-smi; echo libs=$LD_LIBRARY_PATH; [ -c /dev/null ] && echo devices";
  with_gpus.spec.set_resource_spec_id("gpu-2x");
  with_gpus.spec.mutable_quantity()->set_cpu(2);
  with_gpus.spec.mutable_quantity()->set_memory_mb(1024);
  with_gpus.spec.mutable_quantity()->set_gpu(2);
  id = gpu_backend.Submit(with_gpus);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  out = OutputWhenEnded(gpu_backend, *id, &state);
  INFO(out);
  CHECK(state == pb::REPLICA_SUCCEEDED);
  CHECK(absl::StrContains(out, "gpus=0,1\n"));
  CHECK(absl::StrContains(out, "GPU 0: from the node's driver\n"));
  CHECK(absl::StrContains(out, "libs=/usr/local/nvidia/lib64:/usr/local/nvidia/lib\n"));
  CHECK(absl::StrContains(out, "devices\n"));
  // As root, no: its container could open any device.
  ReplicaLaunch root_gpus = with_gpus;
  root_gpus.user = "";
  root_gpus.key.set_job_id(absl::StrCat("rootgpus", getpid()));
  root_gpus.name = ReplicaName(root_gpus.key);
  auto refused = gpu_backend.Submit(root_gpus);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("ordinary accounts only"));

  // A digest the registry does not have: the job fails with the registry's reason.
  ReplicaLaunch missing = launch_of("missing", "");
  missing.image = (*registry)->host() + "/demo/app@sha256:" + std::string(64, '0');
  id = backend.Submit(missing);
  REQUIRE(id.ok());
  out = OutputWhenEnded(backend, *id, &state);
  INFO(out);
  CHECK(state == pb::REPLICA_FAILED);
  CHECK(absl::StrContains(out, "cannot pull image"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("Slurm adapter: with the node held to a time limit and a job queued, Slurm's plan (squeue --start) gives "
          "a spec its wait, and the replicas carry --time [A16]",
          "[A16][slurm]") {
  if (!Cluster().error.empty()) FAIL("Slurm cannot be tested here: " << Cluster().error);
  SlurmBackend backend(Cluster().Options());
  auto usage = backend.GetUsage();
  REQUIRE(usage.ok());
  const int free_cpus = static_cast<int>(usage->free().cpu());
  REQUIRE(free_cpus > 0);
  const std::string run = absl::StrCat("qr", getpid(), "x", absl::ToUnixMillis(absl::Now()));
  auto launch = [&](const std::string& what, int cpus, absl::Duration limit) { return Sleeper(run + what, cpus, limit); };
  // Every free CPU for at most ten minutes, then a one-CPU replica that must wait for them.
  auto filler = backend.Submit(launch("fill", free_cpus, absl::Minutes(10)));
  INFO(filler.status().ToString());
  REQUIRE(filler.ok());
  auto queued = backend.Submit(launch("queued", 1, absl::Minutes(5)));
  REQUIRE(queued.ok());
  auto limit = RunCommand({"squeue", "-h", "-j", *filler, "-o", "%l"}, absl::Seconds(10));
  REQUIRE(limit.ok());
  CHECK(absl::StripAsciiWhitespace(limit->out) == "10:00");  // sbatch --time

  pb::SpecOffer small;
  small.set_resource_spec_id("small");
  small.mutable_quantity()->set_cpu(1);
  pb::SpecOffer huge;
  huge.set_resource_spec_id("huge");
  huge.mutable_quantity()->set_cpu(100000);
  std::vector<pb::SpecStartEstimate> estimates;
  bool planned = jc::testing::WaitUntil(
      [&] {
        auto e = backend.StartEstimates({small, huge});
        if (!e.ok()) return false;
        estimates = *e;
        return estimates.size() == 1 && estimates[0].wait_seconds() > 0;
      },
      std::chrono::seconds(60));
  for (const auto& e : estimates) INFO(e.DebugString());
  CHECK(planned);
  if (planned) {
    CHECK(estimates[0].resource_spec_id() == "small");  // "huge" never fits: unknown, absent
    CHECK(estimates[0].wait_seconds() <= 3600 + 60);
    CHECK(estimates[0].source() == "slurm squeue --start");
  }
  CHECK(backend.Stop(*queued).ok());
  CHECK(backend.Stop(*filler).ok());
}

}  // namespace
}  // namespace jc::adapter::conformance
