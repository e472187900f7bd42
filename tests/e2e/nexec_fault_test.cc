// The executor under a crash (issue 11, SPEC B11, C7): a real nexec master and two real
// agents take thousands of submissions from several clients over gRPC while the master
// is SIGKILLed and restarted on the same store. Afterwards every acknowledged job exists
// and ends DONE (0 lost, 0 stranded), and no job was launched twice (each job's process
// appends its job id to a file: no id appears twice).

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "nexec/v1/nexec.grpc.pb.h"
#include "executor/auth/munge_auth.h"
#include "tests/testing/munge_daemon.h"
#include "tests/testing/process.h"
#include "tests/testing/test_store.h"

using jc::testing::Process;
using jc::testing::WaitUntil;
namespace npb = ::nexec::v1;

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? std::atoi(v) : fallback;
}

std::string CurrentUser() {
  passwd* pw = getpwuid(getuid());
  return pw != nullptr ? pw->pw_name : std::to_string(getuid());
}

}  // namespace

TEST_CASE("a nexec master SIGKILLed during thousands of submissions loses no acknowledged job and launches none "
          "twice [B11][C7]",
          "[B11][C7]") {
  const auto auth = jc::nexec::MungeAuth::Munge(jc::testing::UsePrivateMunged());
  const int jobs = EnvInt("JC_NEXEC_FAULT_JOBS", 5000);
  const int kills = EnvInt("JC_NEXEC_FAULT_KILLS", 2);
  auto dir = std::filesystem::temp_directory_path() / ("jc-nexec-fault-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::string> store_flags{"--data_dir=" + (dir / "data").string()};
  if (jc::testing::TestStoreBackend() == "postgres") {
    store_flags = {std::string("--store=") + std::getenv("JC_TEST_PG_URI"),
                   "--store_schema=nexec_fault_" + std::to_string(getpid())};
  }
  int port = 0, starts = 0;
  std::unique_ptr<Process> master;
  auto start_master = [&] {
    std::vector<std::string> args{JC_NEXEC_MASTER, "--listen=127.0.0.1:" + std::to_string(port),
                                  "--host_timeout=30s", "--metrics_address=",
                                  // SIGKILLed, it waits for its old lease to end when it starts again.
                                  "--lease_ttl=2s"};
    args.insert(args.end(), store_flags.begin(), store_flags.end());
    master = std::make_unique<Process>(args, (dir / ("master" + std::to_string(++starts) + ".log")).string());
    auto p = master->WaitForLog(R"(nexec master listening on port (\d+))");
    INFO(master->Log());
    REQUIRE(p.has_value());
    port = std::stoi(*p);
  };
  start_master();
  std::vector<std::unique_ptr<Process>> agents;
  for (const std::string host : {"node1", "node2"}) {
    agents.push_back(std::make_unique<Process>(
        std::vector<std::string>{JC_NEXEC_AGENT, "--master=127.0.0.1:" + std::to_string(port), "--host=" + host,
                                 "--resources=cpus=16,mem=16G", "--heartbeat=200ms",
                                 "--state_dir=" + (dir / (host + "-state")).string()},
        (dir / (host + ".log")).string()));
    REQUIRE(agents.back()->WaitForLog("listening on").has_value());
  }
  auto stub = [&] {
    return npb::Master::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                    grpc::InsecureChannelCredentials()));
  };

  const std::string ran = (dir / "ran").string();
  std::atomic<int> next{0}, acknowledged{0};
  std::mutex mu;
  std::set<int64_t> acked;
  auto client = [&] {
    auto s = stub();
    for (int i = next++; i < jobs; i = next++) {
      npb::SubmitRequest req;
      req.mutable_spec()->set_command("echo $NEXEC_JOBID >> " + ran);
      req.mutable_spec()->set_user(CurrentUser());
      req.mutable_spec()->set_slots(1);
      // A submission that fails is sent again as a new job (nexec has no idempotency
      // key): only acknowledged ids are promised.
      // Until a deadline, not a count of tries: a restart on a loaded machine (PostgreSQL,
      // munge, the old lease to wait out) took longer than 400 tries of 20 ms in CI.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (std::chrono::steady_clock::now() < give_up) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        npb::SubmitResponse resp;
        absl::Status signed_ok = auth.Sign(&ctx, "Submit", req);
        grpc::Status st = signed_ok.ok() ? s->Submit(&ctx, req, &resp)
                                         : grpc::Status(grpc::StatusCode::UNAVAILABLE, "munge");
        if (st.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          acked.insert(resp.job_id());
          ++acknowledged;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < 8; ++c) threads.emplace_back(client);
  for (int k = 0; k < kills; ++k) {
    int at = (k + 1) * jobs / (kills + 1);
    WaitUntil([&] { return acknowledged >= at; }, std::chrono::seconds(120));
    master->Signal(SIGKILL);
    REQUIRE(master->Wait().has_value());
    start_master();  // same port, same store: the agents and clients find it again
  }
  for (auto& t : threads) t.join();
  REQUIRE(acknowledged == jobs);

  // Every acknowledged job exists and ends DONE.
  auto s = stub();
  std::map<int64_t, std::string> state;
  bool converged = WaitUntil(
      [&] {
        for (int64_t id : acked) {
          if (state[id] == "DONE" || state[id] == "EXIT") continue;
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
          npb::JobRef ref;
          ref.set_job_id(id);
          npb::Job job;
          REQUIRE(auth.Sign(&ctx, "GetJob", ref).ok());
          grpc::Status st = s->GetJob(&ctx, ref, &job);
          state[id] = st.ok() ? npb::JobState_Name(job.state()) : "lost: " + st.error_message();
        }
        return std::all_of(state.begin(), state.end(), [](auto& e) { return e.second == "DONE"; });
      },
      std::chrono::seconds(90));
  int lost = 0, not_done = 0, twice = 0;
  for (const auto& [id, st] : state) {
    if (st.rfind("lost", 0) == 0) ++lost;
    else if (st != "DONE") ++not_done;
  }
  std::map<std::string, int> runs;
  {
    std::ifstream in(ran);
    for (std::string line; std::getline(in, line);) ++runs[line];
  }
  std::string twice_ids;
  for (const auto& [id, n] : runs) {
    if (n > 1) {
      ++twice;
      twice_ids += id + " ";
    }
  }
  WARN("nexec under SIGKILL: " << jobs << " acknowledged submissions, " << kills << " master kills: lost " << lost
                               << ", not DONE " << not_done << ", launched twice " << twice << " " << twice_ids);
  CHECK(converged);
  CHECK(lost == 0);
  CHECK(not_done == 0);
  CHECK(twice == 0);
  agents.clear();
  master.reset();
  if (converged && lost + not_done + twice == 0) std::filesystem::remove_all(dir);
}
