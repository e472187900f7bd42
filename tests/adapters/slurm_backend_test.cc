// Unit tests of the Slurm adapter's translations: states, specs, gres and node figures, and
// the parsers of squeue's and sacct's output (slurm_output.h) on what a cluster may print.

#include <catch2/catch.hpp>
#include <cmath>

#include "adapters/slurm/slurm_backend.h"
#include "adapters/slurm/slurm_output.h"

namespace jc::adapter {
namespace {

TEST_CASE("Slurm job states become replica states with exit codes and reasons [A14]", "[A14]") {
  CHECK(ObserveSlurmJob("PENDING", "Resources", 0).state == pb::REPLICA_PENDING);
  CHECK(ObserveSlurmJob("PENDING", "Resources", 0).message == "slurm: PENDING (Resources)");
  CHECK(ObserveSlurmJob("RUNNING", "None", 0).state == pb::REPLICA_RUNNING);
  CHECK(ObserveSlurmJob("RUNNING", "None", 0).message.empty());
  CHECK(ObserveSlurmJob("COMPLETING", "None", 0).state == pb::REPLICA_RUNNING);
  CHECK(ObserveSlurmJob("COMPLETED", "None", 0).state == pb::REPLICA_SUCCEEDED);

  auto failed = ObserveSlurmJob("FAILED", "NonZeroExitCode", 3 << 8);
  CHECK(failed.state == pb::REPLICA_FAILED);
  CHECK(failed.exit_code == 3);
  CHECK(failed.message == "exited with 3");

  auto killed = ObserveSlurmJob("FAILED", "NonZeroExitCode", 9);
  CHECK(killed.exit_code == 128 + 9);

  auto timeout = ObserveSlurmJob("TIMEOUT", "TimeLimit", 0);
  CHECK(timeout.state == pb::REPLICA_FAILED);
  CHECK(timeout.message == "slurm: TIMEOUT (TimeLimit)");
  CHECK(ObserveSlurmJob("OUT_OF_MEMORY", "OutOfMemory", 0).state == pb::REPLICA_FAILED);
  CHECK(ObserveSlurmJob("NODE_FAIL", "NodeDown", 0).state == pb::REPLICA_FAILED);

  // sacct says "CANCELLED by 0".
  auto cancelled = ObserveSlurmJob("CANCELLED by 0", "", 15);
  CHECK(cancelled.state == pb::REPLICA_STOPPED);
  CHECK(cancelled.exit_code == 128 + 15);
}

TEST_CASE("A resource spec becomes sbatch's cpus, memory and gres [A14]", "[A14]") {
  pb::SpecOffer spec;
  spec.mutable_quantity()->set_cpu(2.5);
  spec.mutable_quantity()->set_memory_mb(2048);
  spec.mutable_quantity()->set_gpu(4);
  spec.mutable_quantity()->set_npu(1);
  CHECK(SbatchResourceArgs(spec) ==
        std::vector<std::string>{"--ntasks=1", "--cpus-per-task=3", "--mem=2048", "--gres=gpu:4,npu:1"});
  pb::SpecOffer cpu_only;
  cpu_only.mutable_quantity()->set_cpu(1);
  CHECK(SbatchResourceArgs(cpu_only) == std::vector<std::string>{"--ntasks=1", "--cpus-per-task=1"});
}

TEST_CASE("gres strings are counted by name, with types and index lists [A14]", "[A14]") {
  CHECK(GresCount("gpu:8", "gpu") == 8);
  CHECK(GresCount("gpu:a100:4(S:0-1)", "gpu") == 4);
  CHECK(GresCount("gpu:a100:2(IDX:0,3),gpu:v100:1(IDX:5),npu:1", "gpu") == 3);
  CHECK(GresCount("gpu:a100:2(IDX:0,3),npu:1", "npu") == 1);
  CHECK(GresCount("(null)", "gpu") == 0);
  CHECK(GresCount("", "gpu") == 0);
}

TEST_CASE("sinfo's node lines add up to the usable capacity and its use [A14][A3]", "[A14]") {
  std::string sinfo =
      "n1|3/61/0/64|65536|1000|gpu:8|gpu:2(IDX:0-1)|mixed|\n"
      "n1|3/61/0/64|65536|1000|gpu:8|gpu:2(IDX:0-1)|mixed|\n"  // the same node in a second partition
      "n2|0/32/0/32|32768|0|(null)|gpu:0|idle|\n"
      "n3|0/0/32/32|32768|0|gpu:4|gpu:0|down*|\n"
      "n4|0/32/0/32|32768|0|gpu:4|gpu:0|drained|\n";
  SlurmNodeTotals t = ParseSinfoNodes(sinfo);
  CHECK(t.nodes == 2);
  CHECK(t.cpu_total == 96);
  CHECK(t.cpu_alloc == 3);
  CHECK(t.memory_mb == 98304);
  CHECK(t.memory_alloc_mb == 1000);
  CHECK(t.gpu_total == 8);
  CHECK(t.gpu_alloc == 2);
}

TEST_CASE("squeue's job lines become observations by job id and other lines are skipped [A14]", "[A14]") {
  // As `squeue --states=all -h -O <kSqueueJobFields>` prints them (padded, '|' after each).
  const char* text =
      "101                 |RUNNING             |None                |0                   |2026-11-26T10:00:00 |N/A |\n"
      "102|FAILED|NonZeroExitCode|768|2026-11-26T10:00:00|2026-11-26T10:00:05|\n"
      "103|PENDING|Resources|0|N/A|N/A|\n"
      "slurm_load_jobs warning: something Slurm adds\n"
      "abc|COMPLETED|None|0|||\n"
      "104|CANCELLED by 0|None\n";
  auto jobs = ParseSqueueJobs(text);
  REQUIRE(jobs.size() == 3);
  CHECK(jobs.at("101").state == pb::REPLICA_RUNNING);
  REQUIRE(jobs.at("101").started_at.has_value());
  CHECK_FALSE(jobs.at("101").ended_at.has_value());
  CHECK(jobs.at("102").state == pb::REPLICA_FAILED);
  CHECK(jobs.at("102").exit_code == 3);
  REQUIRE(jobs.at("102").usage.has_value());
  CHECK(jobs.at("102").usage->wall_seconds() == Approx(5));
  CHECK(jobs.at("103").message == "slurm: PENDING (Resources)");
  CHECK(ParseSqueueJobs("").empty());
}

TEST_CASE("squeue's states are counted, and only a job carrying the adapter's tag is its replica, the oldest first [A14]",
          "[A14]") {
  SqueueCounts c = ParseSqueueStates("RUNNING\nPENDING\n  COMPLETING \nCONFIGURING\nCOMPLETED\nbogus\n");
  CHECK(c.running == 2);
  CHECK(c.waiting == 2);
  CHECK(OldestTaggedJob("300|jc:abc\n200|jc:abc \n100|jc:other\n50|\nx|jc:abc\n-5|jc:abc\n", "jc:abc") == "200");
  CHECK(OldestTaggedJob("100|jc:other\n", "jc:abc").empty());
  CHECK(OldestTaggedJob("", "jc:abc").empty());
}

TEST_CASE("numbers out of range in Slurm's output count as nothing, never as wrapped values [A14]", "[A14]") {
  // Before, sums past int's range and a double cast past int64's were undefined behaviour
  // (UBSan: "signed integer overflow: 2147483647 + 2147483647" in GresCount), and an exit
  // code past 255 or below 0 became a wait status of another code.
  CHECK(WaitStatusFromExitCode("3:0") == (3 << 8));
  CHECK(WaitStatusFromExitCode("0:9") == 9);
  CHECK(WaitStatusFromExitCode("99999999999:0") == 0);
  CHECK(WaitStatusFromExitCode("16777216:0") == 0);
  CHECK(WaitStatusFromExitCode("1:-4") == (1 << 8));
  CHECK(GresCount("gpu:2147483647,gpu:2147483647", "gpu") == 2147483647);
  CHECK(GresCount("gpu:-4", "gpu") == 0);
  CHECK(SlurmDurationSeconds("1e308-00:00") == 0);
  CHECK(SlurmDurationSeconds("inf") == 0);
  CHECK(SlurmDurationSeconds("nan") == 0);
  // sacct: MaxRSS past int64, disk bytes summed past it, a GPU count past int32.
  std::map<std::string, ReplicaObservation> out;
  ReadSacct(
      "7|COMPLETED|0:0|2026-11-26T10:00:00|2026-11-26T10:00:10|00:01||gres/gpu=99999999999||\n"
      "7.0|COMPLETED|0:0|2026-11-26T10:00:00|2026-11-26T10:00:10|00:01|1e300G|||fs/disk=9223372036854775807\n"
      "7.1|COMPLETED|0:0|2026-11-26T10:00:00|2026-11-26T10:00:10|00:01|nanK|||fs/disk=9223372036854775807\n",
      {"7"}, &out);
  REQUIRE(out.count("7") == 1);
  REQUIRE(out.at("7").usage.has_value());
  CHECK(out.at("7").usage->memory_peak_mb() == 0);
  CHECK(out.at("7").usage->write_bytes() == INT64_MAX);
  CHECK(out.at("7").usage->gpus() == INT32_MAX);
  // sinfo: node figures summed past int's range.
  std::string sinfo;
  for (int i = 0; i < 3; ++i) {
    sinfo += "n" + std::to_string(i) + "|0/0/0/2147483647|9223372036854775807|0|gpu:2147483647|(null)|idle\n";
  }
  SlurmNodeTotals t = ParseSinfoNodes(sinfo);
  CHECK(t.nodes == 3);
  CHECK(t.cpu_total == INT32_MAX);
  CHECK(t.memory_mb == INT64_MAX);
  CHECK(t.gpu_total == INT32_MAX);
}

}  // namespace
// Slurm prints times in the cluster's local time.
absl::Time SlurmLocal(const char* text) {
  absl::TimeZone tz;
  if (!absl::LoadTimeZone("localtime", &tz)) tz = absl::UTCTimeZone();
  absl::Time t;
  std::string error;
  REQUIRE(absl::ParseTime("%Y-%m-%dT%H:%M:%S", text, tz, &t, &error));
  return t;
}

TEST_CASE("squeue's plan is parsed robustly: N/A and NONE are unknown, odd lines are skipped [A16]", "[A16]") {
  // As Slurm 22.05 prints `squeue --start -h -o %i|%T|%S|%e|%C|%b` and `-t RUNNING`.
  const std::string text =
      "1|RUNNING|2026-11-29T09:03:57|2026-11-29T09:13:57|64|N/A\n"
      "2|PENDING|2026-11-29T09:13:57|2026-11-29T09:18:57|2|gres:gpu:2\n"
      "squeue: warning: something Slurm adds\n"
      "3|PENDING|N/A|N/A|4|N/A\n"
      "4_7|PENDING|2026-11-29T10:18:00|NONE|1|gres/gpu:a100:1,gres/npu:1\n"
      "5|SUSPENDED|2026-11-29T09:00:00|Unknown|8|N/A\n"
      "x|PENDING|N/A|N/A|1|N/A\n"
      "6|RUNNING|2026-11-29T09:00:00|NONE|-3|N/A\n"
      "7|RUNNING|2026-11-29T09:00:00|NONE|99999999999|N/A|extra\n";
  std::vector<QueuedJob> jobs = ParseSqueueQueue(text);
  REQUIRE(jobs.size() == 4);
  CHECK(jobs[0].id == "1");
  CHECK_FALSE(jobs[0].pending);
  CHECK(jobs[0].end == SlurmLocal("2026-11-29T09:13:57"));
  CHECK(jobs[0].cpus == 64);
  CHECK(jobs[0].gpus == 0);
  CHECK(jobs[1].pending);
  CHECK(jobs[1].start == SlurmLocal("2026-11-29T09:13:57"));
  CHECK(jobs[1].gpus == 2);
  CHECK(jobs[2].id == "3");
  CHECK_FALSE(jobs[2].start.has_value());  // N/A: the planner has not placed it
  CHECK(jobs[3].id == "4_7");
  CHECK(jobs[3].gpus == 1);
  CHECK_FALSE(jobs[3].end.has_value());
  CHECK(ParseSqueueQueue("").empty());
}

TEST_CASE("a spec's wait by Slurm's plan: behind pending jobs no bigger, after running ones free enough [A16]",
          "[A16]") {
  const absl::Time now = SlurmLocal("2026-11-29T09:05:00");
  std::vector<QueuedJob> jobs = ParseSqueueQueue(
      "1|RUNNING|2026-11-29T09:03:57|2026-11-29T09:13:57|60|N/A\n"
      "2|PENDING|2026-11-29T09:13:57|2026-11-29T09:18:57|2|gres:gpu:2\n"
      "3|PENDING|2026-11-29T10:18:00|2026-11-29T11:18:00|8|N/A\n");
  // 4 CPUs and 8 GPUs free. One CPU fits now: no pending job of 1 CPU is ahead of it.
  CHECK(SlurmStartWait(jobs, 4, 8, 1, 0, now) == absl::ZeroDuration());
  // Two CPUs and two GPUs: behind job 2 (no bigger), which Slurm starts at 09:13:57.
  CHECK(SlurmStartWait(jobs, 4, 8, 2, 2, now) == SlurmLocal("2026-11-29T09:13:57") - now);
  // Eight CPUs: behind job 3 (expected 10:18) and after job 1 frees its 60.
  CHECK(SlurmStartWait(jobs, 4, 8, 8, 0, now) == SlurmLocal("2026-11-29T10:18:00") - now);
  // Sixteen: job 3, smaller, is ahead of it as well.
  CHECK(SlurmStartWait(jobs, 4, 8, 16, 0, now) == SlurmLocal("2026-11-29T10:18:00") - now);
  // More than the cluster ever frees: unknown.
  CHECK_FALSE(SlurmStartWait(jobs, 4, 8, 100, 0, now).has_value());

  // N/A means unknown, never "no wait".
  std::vector<QueuedJob> unplanned = ParseSqueueQueue("9|PENDING|N/A|N/A|1|N/A\n");
  CHECK_FALSE(SlurmStartWait(unplanned, 4, 0, 1, 0, now).has_value());
  CHECK(SlurmStartWait(unplanned, 4, 0, 0, 0, now) == absl::ZeroDuration());  // not behind it: it needs more
  // A running job without a time limit (NONE) in the way: unknown.
  std::vector<QueuedJob> endless = ParseSqueueQueue("8|RUNNING|2026-11-29T09:00:00|NONE|4|N/A\n");
  CHECK_FALSE(SlurmStartWait(endless, 0, 0, 1, 0, now).has_value());
  CHECK(SlurmStartWait(endless, 1, 0, 1, 0, now) == absl::ZeroDuration());
  // Nothing queued, nothing running, room: at once.
  CHECK(SlurmStartWait({}, 4, 0, 2, 0, now) == absl::ZeroDuration());
}

TEST_CASE("a time limit becomes sbatch's --time in whole minutes, rounded up [A16]", "[A16]") {
  CHECK(SbatchTimeArg(absl::ZeroDuration()) == "");
  CHECK(SbatchTimeArg(absl::Hours(2)) == "--time=120");
  CHECK(SbatchTimeArg(absl::Seconds(61)) == "--time=2");
  CHECK(SbatchTimeArg(absl::Seconds(1)) == "--time=1");
}

}  // namespace jc::adapter

TEST_CASE("Slurm adapter: sacct's durations read as seconds (TotalCPU of an ended job) [A14]", "[A14]") {
  CHECK(jc::adapter::SlurmDurationSeconds("00:01.500") == Approx(1.5));
  CHECK(jc::adapter::SlurmDurationSeconds("02:03:04") == Approx(2 * 3600 + 3 * 60 + 4));
  CHECK(jc::adapter::SlurmDurationSeconds("1-00:00:01") == Approx(86401));
  CHECK(jc::adapter::SlurmDurationSeconds("") == 0);
  CHECK(jc::adapter::SlurmDurationSeconds("bogus") == 0);
}

TEST_CASE("Slurm adapter: a time field reading \"infinite-future\" or \"infinite-past\" is no time, never an infinite "
          "wall time (found by slurm_output_fuzz) [A14]",
          "[A14]") {
  const char* text =
      "4242|COMPLETED|0:0|2026-11-26T10:00:00|infinite-future|01:30.250||billing=4,cpu=4,node=1||\n"
      "4243|COMPLETED|0:0|infinite-past|2026-11-26T10:00:10|00:01||cpu=1||\n";
  std::map<std::string, jc::adapter::ReplicaObservation> out;
  jc::adapter::ReadSacct(text, {"4242", "4243"}, &out);
  for (const auto& [id, o] : out) {
    INFO(id);
    if (!o.usage.has_value()) continue;
    CHECK(std::isfinite(o.usage->wall_seconds()));
    CHECK(o.usage->wall_seconds() == 0);
  }
}

TEST_CASE("Slurm adapter: an ended job's usage from sacct: CPU, peak memory, GPUs and disk IO of its steps [A14]",
          "[A14]") {
  // As `sacct -n -P -o <kSacctFields>` prints a GPU job with a batch step and one srun step.
  const char* text =
      "4242|COMPLETED|0:0|2026-11-26T10:00:00|2026-11-26T10:01:40|01:30.250||billing=4,cpu=4,gres/gpu=2,mem=8G,"
      "node=1||\n"
      "4242.batch|COMPLETED|0:0|2026-11-26T10:00:00|2026-11-26T10:01:40|00:00.250|2048K|cpu=4,gres/gpu=2,mem=8G,"
      "node=1|cpu=00:00:00,energy=0,fs/disk=1000,mem=2048K,pages=0,vmem=10M|energy=0,fs/disk=300\n"
      "4242.0|COMPLETED|0:0|2026-11-26T10:00:01|2026-11-26T10:01:39|01:30|3.5M|cpu=4,gres/gpu=2,mem=8G,node=1|"
      "cpu=00:01:30,energy=0,fs/disk=5000,mem=3.5M,pages=2,vmem=20M|energy=0,fs/disk=700\n"
      "4243|FAILED|3:0|2026-11-26T10:00:00|2026-11-26T10:00:10|00:01||billing=1,cpu=1,mem=1G,node=1||\n"
      "9999|COMPLETED|0:0|2026-11-26T10:00:00|2026-11-26T10:00:10|00:01||cpu=1||\n";
  std::map<std::string, jc::adapter::ReplicaObservation> out;
  jc::adapter::ReadSacct(text, {"4242", "4243"}, &out);
  REQUIRE(out.size() == 2);  // 9999 is not the adapter's question
  const auto& gpu = out.at("4242");
  CHECK(gpu.state == jc::adapter::pb::REPLICA_SUCCEEDED);
  REQUIRE(gpu.usage.has_value());
  CHECK(gpu.usage->wall_seconds() == Approx(100));
  CHECK(gpu.usage->cpu_seconds() == Approx(90.25));
  CHECK(gpu.usage->memory_peak_mb() == 3);  // the larger step's 3.5 MiB, whole MiB
  CHECK(gpu.usage->gpus() == 2);
  CHECK(gpu.usage->gpu_seconds() == Approx(200));
  CHECK(gpu.usage->read_bytes() == 6000);
  CHECK(gpu.usage->write_bytes() == 1000);
  const auto& failed = out.at("4243");
  CHECK(failed.state == jc::adapter::pb::REPLICA_FAILED);
  REQUIRE(failed.usage.has_value());
  CHECK(failed.usage->gpus() == 0);
  CHECK(failed.usage->gpu_seconds() == 0);
  CHECK(failed.usage->wall_seconds() == Approx(10));
}
