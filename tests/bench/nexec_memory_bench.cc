// What the nexec master keeps of the jobs it ran: waves of trivial keyed jobs (as the
// native adapter submits them) run to completion on a loopback cluster (a real master and
// three real agents), once with ended jobs kept in memory for ever (--clean_period=0) and
// once with a clean period of a second. Prints the master's resident memory after each
// wave; asserts nothing.
//   build/tests/bench/nexec_memory_bench [jobs per wave] [waves] [submitters]

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "executor/auth/munge_auth.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "tests/bench/nexec_bench_cluster.h"
#include "tests/testing/process.h"

namespace pb = ::nexec::v1;

namespace {

// Jobs in these states the master holds now.
int Held(jc::bench::NexecBenchCluster& cluster, std::vector<pb::JobState> states) {
  pb::ListJobsRequest req;
  for (pb::JobState s : states) req.add_states(s);
  pb::ListJobsResponse resp;
  auto* stub = cluster.stub();
  if (!cluster.Call("ListJobs", req, [&](grpc::ClientContext* ctx) { return stub->ListJobs(ctx, req, &resp); }).ok()) {
    return -1;
  }
  return resp.jobs_size();
}

// `rounds` waves of `jobs` jobs each, as a master that runs for a long time sees them: each
// wave runs to its end (and, with a clean period, past it) before the next; the master's
// RSS after each.
void Run(int jobs, int rounds, int submitters, const std::string& clean_period, const std::filesystem::path& dir) {
  jc::bench::NexecBenchCluster::Options options;
  options.extra_flags = {"--auth=none"};
  options.master_flags = {"--clean_period=" + clean_period};
  jc::bench::NexecBenchCluster cluster(dir, options, jc::nexec::MungeAuth::Disabled());
  const long before = cluster.MasterRssKb();
  auto* stub = cluster.stub();
  // JC_BENCH_NO_KEYS=1: without submit keys (as the CLI submits), to see what the keys' index costs.
  const bool keyed = std::getenv("JC_BENCH_NO_KEYS") == nullptr;
  std::atomic<int> failed{0};
  std::string figures;
  long after = before;
  for (int round = 0; round < rounds; ++round) {
    std::atomic<int> next{round * jobs};
    const int last = (round + 1) * jobs;
    std::vector<std::thread> threads;
    for (int t = 0; t < submitters; ++t) {
      threads.emplace_back([&] {
        for (int i = next++; i < last; i = next++) {
          pb::SubmitRequest req;
          req.mutable_spec()->set_command("true");
          req.mutable_spec()->set_user(getlogin() ? getlogin() : "root");
          req.mutable_spec()->set_stdout_path("/dev/null");
          if (keyed) req.mutable_spec()->set_submit_key("jc-bench-job-" + std::to_string(i) + "-0-0-0");  // as the adapter's
          pb::SubmitResponse resp;
          if (!cluster.Call("Submit", req, [&](grpc::ClientContext* ctx) { return stub->Submit(ctx, req, &resp); })
                   .ok()) {
            failed++;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    jc::testing::WaitUntil([&] { return Held(cluster, {pb::PENDING, pb::RUNNING}) == 0; }, std::chrono::minutes(10));
    if (clean_period != "0") {
      jc::testing::WaitUntil([&] { return Held(cluster, {pb::DONE, pb::EXIT}) == 0; }, std::chrono::minutes(2));
    }
    after = cluster.MasterRssKb();
    figures += (figures.empty() ? "" : ", ") + std::to_string(after / 1024) + " MB";
  }
  const int held = Held(cluster, {pb::DONE, pb::EXIT});
  std::printf("--clean_period=%s: %d waves of %d %s jobs (%d submit errors); ended jobs the master holds at the end: "
              "%s; its RSS %.0f MB at the start, after each wave: %s (%.2f kB per job run)\n",
              clean_period.c_str(), rounds, jobs, keyed ? "keyed" : "unkeyed", failed.load(),
              held >= 0 ? std::to_string(held).c_str() : "too many to list in one answer",
              before / 1024.0, figures.c_str(), static_cast<double>(after - before) / (jobs * rounds));
}

}  // namespace

int main(int argc, char** argv) {
  const int jobs = argc > 1 ? std::atoi(argv[1]) : 10000;  // per wave
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const int submitters = argc > 3 ? std::atoi(argv[3]) : 16;
  const char* base = std::getenv("JC_BENCH_DIR");
  for (const std::string period : {"0", "1s"}) {
    auto dir = std::filesystem::path(base ? base : std::filesystem::temp_directory_path().string()) /
               ("jc-nexec-memory-bench-" + std::to_string(getpid()) + "-" + (period == "0" ? "never" : "1s"));
    Run(jobs, rounds, submitters, period, dir);
    std::filesystem::remove_all(dir);
  }
  return 0;
}
