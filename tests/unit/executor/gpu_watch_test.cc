// The agent's GPU watch (executor/agent/gpu_watch.h): a failed nvidia-smi at start is
// asked again until it answers, and a sample says what each task used and which of its
// processes were on a GPU not given to its job, without touching the agent's tasks.

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "executor/agent/gpu_watch.h"

using namespace jc::nexec;

TEST_CASE("a GPU sample is assessed per task: memory by process group, mean utilisation of its GPUs, and misuse "
          "once per task and GPU [B6][B8]",
          "[B6][B8]") {
  const pid_t me = getpgid(0);
  GpuSnapshot sample;
  sample.gpus = {{0, "GPU-a", "NVIDIA H100", 80000, 0, 40}, {1, "GPU-b", "NVIDIA H100", 80000, 0, 60},
                 {2, "GPU-c", "NVIDIA H100", 80000, 0, 10}};
  sample.processes = {{0, getpid(), 100},  // on its own GPU
                      {1, getpid(), 50},   // misuse
                      {1, getpid(), 25},   // the same GPU again: one note
                      {2, getpid(), 5},    // reported before: no note
                      {0, 999999999, 7}};  // no such process: not ours
  std::vector<GpuWatch::TaskGpus> tasks(2);
  tasks[0].key = "7.0.0";
  tasks[0].pgid = me;
  tasks[0].gpus = {0};
  tasks[0].misused = {2};
  tasks[0].job_id = 7;
  tasks[1].key = "8.1.0";  // no process yet
  tasks[1].gpus = {0, 1};
  tasks[1].job_id = 8;
  tasks[1].task_index = 1;

  GpuWatch::Assessment found = GpuWatch::Assess(sample, tasks, /*kill_misuse=*/true);
  REQUIRE(found.use.size() == 2);
  CHECK(found.use["7.0.0"].memory_mb == 180);
  CHECK(found.use["7.0.0"].utilization == 40);
  CHECK(found.use["8.1.0"].memory_mb == 0);
  CHECK(found.use["8.1.0"].utilization == 50);
  REQUIRE(found.misuse.size() == 1);
  CHECK(found.misuse[0].key == "7.0.0");
  CHECK(found.misuse[0].gpu == 1);
  CHECK(found.misuse[0].note.job_id() == 7);
  CHECK(found.misuse[0].note.killed());
  CHECK(found.misuse[0].note.message() ==
        absl::StrCat("GPU misuse: pid ", getpid(),
                     " used GPU 1 (50 MB), which was not given to the job (its GPUs: 0); the task was killed"));

  GpuWatch::Assessment reported = GpuWatch::Assess(sample, tasks, /*kill_misuse=*/false);
  REQUIRE(reported.misuse.size() == 1);
  CHECK_FALSE(reported.misuse[0].note.killed());
  CHECK(reported.misuse[0].note.message().find("; reported only") != std::string::npos);
}

TEST_CASE("an nvidia-smi that fails at start is asked again, and once it answers, its GPUs, model and UUIDs are the "
          "host's and the watch runs [B8]",
          "[B8]") {
  char dir_template[] = "/tmp/gpu-watch-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string smi = dir + "/nvidia-smi";
  {
    std::ofstream script(smi);
    script << "#!/bin/sh\n"
           << "[ -e " << dir << "/up ] || exit 1\n"
           << "case \"$1\" in --query-gpu=*) echo '0, GPU-aaaa, NVIDIA H100 80GB HBM3, 81559, 1024, 37';"
           << " echo '1, GPU-bbbb, NVIDIA H100 80GB HBM3, 81559, 0, 0';; esac\n";
  }
  chmod(smi.c_str(), 0755);

  GpuWatch watch(smi);
  ::nexec::v1::AgentInfo host;
  host.set_cpus(8);
  CHECK(watch.Probe(&host).code() == absl::StatusCode::kUnavailable);
  CHECK(host.gpus_size() == 0);
  CHECK(watch.Reprobing());
  CHECK_FALSE(watch.Watching());
  int finished = 0;
  auto finish = [&](::nexec::v1::AgentInfo* info) {
    ++finished;
    (*info->mutable_resources())["site"] = "x";
    return absl::OkStatus();
  };
  CHECK_FALSE(watch.ProbeAgain(host, finish).has_value());  // still failing
  CHECK(watch.Reprobing());
  CHECK(finished == 0);

  std::ofstream(dir + "/up").put('\n');
  auto again = watch.ProbeAgain(host, finish);
  REQUIRE(again.has_value());
  CHECK(again->cpus() == 8);
  CHECK(again->gpus_size() == 2);
  CHECK(again->resources().at("model") == "H100");
  CHECK(again->resources().at("gpumem") == "81559");
  CHECK(again->resources().at("site") == "x");
  CHECK(finished == 1);
  CHECK(watch.Watching());
  CHECK_FALSE(watch.Reprobing());
  CHECK(watch.UuidsOf({1, 5}) == std::vector<std::string>{"GPU-bbbb"});
  REQUIRE(watch.Sample().has_value());

  GpuWatch none(dir + "/missing");  // a host without nvidia-smi: nothing to say, nothing to watch
  ::nexec::v1::AgentInfo bare;
  CHECK(none.Probe(&bare).ok());
  CHECK_FALSE(none.Watching());
  CHECK_FALSE(none.Reprobing());
  std::system(("rm -rf " + dir).c_str());
}
