// Benchmark of the executor's multi-host jobs (issue 14): one job of 64 tasks over 16
// agents on this machine (4 slots per host, one task per slot), timed from submit until
// every task runs and from kill until no task's process is left. The tasks are started
// two ways: one `nexec-run HOST` process per task (as MPI launchers do), and one
// `nexec-run -z "$NEXEC_HOSTS"` for all of them (LSF's blaunch -z). When a
// Slurm cluster is reachable (SLURM_CONF set, srun on PATH), the same 64 tasks through
// `srun -n 64` in the same run (the test cluster of scripts/slurm.sh is one node: the
// shape is 64 tasks, not 16 hosts). Prints figures; asserts nothing.
//   build/tests/bench/nexec_multihost_bench [agents] [slots_per_agent] [rounds]

#include <dirent.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "executor/auth/munge_auth.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "tests/bench/nexec_bench_cluster.h"
#include "tests/testing/munge_daemon.h"
#include "tests/testing/process.h"

namespace pb = ::nexec::v1;
namespace fs = std::filesystem;

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int FilesIn(const fs::path& dir) {
  std::error_code ec;
  int n = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

// Processes whose command line holds `token` (the tasks' `sleep <token>`), from /proc.
int ProcessesWith(const std::string& token) {
  int n = 0;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  while (dirent* e = readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    // read(2), not a stream: a process that exits during the read makes it fail with
    // ESRCH, which libstdc++'s streams throw as an exception.
    std::string cmdline;
    int fd = open((std::string("/proc/") + e->d_name + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[512];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) cmdline.append(buf, static_cast<size_t>(n));
    close(fd);
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.rfind("sleep " + token, 0) == 0) ++n;
  }
  closedir(proc);
  return n;
}

struct Times {
  double start = -1;  // submit -> every task runs
  double stop = -1;   // kill -> no task's process left
};

Times RunNexec(int agents, int per_agent, const fs::path& dir, int round, bool fan_out) {
  jc::bench::NexecBenchCluster::Options options;
  options.agents = agents;
  options.agent_resources = "cpus=" + std::to_string(per_agent) + ",mem=64G";
  options.heartbeat = "200ms";
  jc::bench::NexecBenchCluster cluster(dir, options, jc::nexec::MungeAuth::Munge(jc::testing::UsePrivateMunged()));
  auto* stub = cluster.stub();
  auto call = [&](const char* method, const google::protobuf::Message& req) { return cluster.Context(method, req); };
  const int tasks = agents * per_agent;
  fs::path started = dir / ("started-" + std::to_string(round));
  fs::create_directories(started);
  const std::string token = std::to_string(900000 + getpid() % 1000 * 10 + round);
  // The job's command starts one task per slot through nexec-run, each marking its start.
  const std::string task = "'touch " + started.string() + "/$NEXEC_TASK_INDEX; exec sleep " + token + "'";
  std::string command = fan_out ? std::string(JC_NEXEC_RUN) + " --env none -z \"$NEXEC_HOSTS\" " + task
                                : "for h in $NEXEC_HOSTS; do " + std::string(JC_NEXEC_RUN) + " --env none $h " + task +
                                      " & done; wait";
  pb::SubmitRequest submit;
  submit.mutable_spec()->set_command(command);
  submit.mutable_spec()->set_slots(tasks);
  submit.mutable_spec()->set_requirement("span[ptile=" + std::to_string(per_agent) + "]");
  submit.mutable_spec()->set_stdout_path((dir / "job.out").string());
  pb::SubmitResponse resp;
  Times t;
  auto begin = std::chrono::steady_clock::now();
  {
    auto ctx = call("Submit", submit);
    grpc::Status s = stub->Submit(ctx.get(), submit, &resp);
    if (!s.ok()) {
      std::fprintf(stderr, "submit failed: %s\n", s.error_message().c_str());
      std::exit(1);
    }
  }
  if (jc::testing::WaitUntil([&] { return FilesIn(started) >= tasks && ProcessesWith(token) >= tasks; },
                             std::chrono::seconds(120))) {
    t.start = Seconds(begin);
  }
  pb::JobRef ref;
  ref.set_job_id(resp.job_id());
  auto kill_at = std::chrono::steady_clock::now();
  {
    pb::ControlResponse out;
    auto ctx = call("Kill", ref);
    (void)stub->Kill(ctx.get(), ref, &out);
  }
  if (jc::testing::WaitUntil([&] { return ProcessesWith(token) == 0; }, std::chrono::seconds(60))) {
    t.stop = Seconds(kill_at);
  }
  return t;
}

Times RunSlurm(int tasks, int round) {
  Times t;
  if (std::getenv("SLURM_CONF") == nullptr || std::system("command -v srun >/dev/null 2>&1") != 0) return t;
  const std::string token = std::to_string(800000 + getpid() % 1000 * 10 + round);
  fs::path started = fs::temp_directory_path() / ("jc-srun-started-" + token);
  fs::remove_all(started);
  fs::create_directories(started);
  std::string cmd = "srun --quiet -n " + std::to_string(tasks) + " -J jc-bench-" + token +
                    " sh -c 'touch " + started.string() + "/$SLURM_PROCID; exec sleep " + token +
                    "' >/dev/null 2>&1 &";
  auto begin = std::chrono::steady_clock::now();
  if (std::system(cmd.c_str()) != 0) return t;
  if (jc::testing::WaitUntil([&] { return FilesIn(started) >= tasks && ProcessesWith(token) >= tasks; },
                             std::chrono::seconds(120))) {
    t.start = Seconds(begin);
  }
  auto kill_at = std::chrono::steady_clock::now();
  (void)std::system(("scancel --name=jc-bench-" + token).c_str());
  if (jc::testing::WaitUntil([&] { return ProcessesWith(token) == 0; }, std::chrono::seconds(60))) {
    t.stop = Seconds(kill_at);
  }
  fs::remove_all(started);
  return t;
}

std::string Figure(double s) {
  char buf[32];
  if (s < 0) return "did not finish";
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int agents = argc > 1 ? std::atoi(argv[1]) : 16;
  int per_agent = argc > 2 ? std::atoi(argv[2]) : 4;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  if (agents < 1 || per_agent < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: nexec_multihost_bench [agents] [slots_per_agent] [rounds]\n");
    return 2;
  }
  const int tasks = agents * per_agent;
  std::printf("one job of %d tasks (%d agents x %d slots, one task per slot) on this machine\n", tasks, agents,
              per_agent);
  for (int round = 0; round < rounds; ++round) {
    fs::path dir = fs::temp_directory_path() / ("jc-multihost-bench-" + std::to_string(getpid()) + "-" +
                                                std::to_string(round));
    fs::remove_all(dir);
    fs::create_directories(dir);
    Times each = RunNexec(agents, per_agent, dir / "each", round, false);
    Times fan = RunNexec(agents, per_agent, dir / "fan", round, true);
    Times slurm = RunSlurm(tasks, round);
    std::printf("round %d: nexec, %d nexec-run: all running %s, none left %s after kill | one nexec-run -z: %s, %s",
                round + 1, tasks, Figure(each.start).c_str(), Figure(each.stop).c_str(), Figure(fan.start).c_str(),
                Figure(fan.stop).c_str());
    if (slurm.start < 0 && slurm.stop < 0) {
      std::printf(" | slurm: not measured (no Slurm cluster: set SLURM_CONF)\n");
    } else {
      std::printf(" | srun -n %d: all running %s, none left %s after scancel\n", tasks, Figure(slurm.start).c_str(),
                  Figure(slurm.stop).c_str());
    }
    std::fflush(stdout);
    fs::remove_all(dir);
  }
  return 0;
}
