#pragma once

// A loopback nexec cluster for the benchmarks: a real master and real agents (node1 ..
// nodeN), started and joined before anything is measured, stopped with the object.
// Header-only: the including benchmark defines JC_NEXEC_MASTER and JC_NEXEC_AGENT.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include "executor/auth/munge_auth.h"
#include "nexec/v1/nexec.grpc.pb.h"
#include "tests/testing/process.h"

namespace jc::bench {

class NexecBenchCluster {
 public:
  struct Options {
    int agents = 3;
    std::string agent_resources = "cpus=64,mem=64G";
    std::string heartbeat;                    // the agents' --heartbeat; empty: their default
    std::vector<std::string> extra_flags;     // for the master and every agent (--auth=none)
    std::vector<std::string> master_flags;    // for the master only
    std::vector<std::string> agent_flags;     // for every agent only
    bool master_metrics = false;              // the master serves /metrics (costs a little per job)
  };

  // Exits the benchmark, saying why, when the master does not start or agents do not join.
  NexecBenchCluster(const std::filesystem::path& dir, const Options& options, nexec::MungeAuth auth)
      : auth_(std::move(auth)) {
    std::filesystem::create_directories(dir);
    std::vector<std::string> master_args{JC_NEXEC_MASTER, "--listen=127.0.0.1:0",
                                         options.master_metrics ? "--metrics_address=127.0.0.1:0" : "--metrics_address=",
                                         "--data_dir=" + (dir / "data").string(),
                                         "--log_dir=" + (dir / "logs").string()};
    master_args.insert(master_args.end(), options.extra_flags.begin(), options.extra_flags.end());
    master_args.insert(master_args.end(), options.master_flags.begin(), options.master_flags.end());
    master_ = std::make_unique<testing::Process>(master_args, (dir / "master.log").string());
    auto port = master_->WaitForLog(R"(nexec master listening on port (\d+))");
    if (!port) {
      std::fprintf(stderr, "master did not start:\n%s\n", master_->Log().c_str());
      std::exit(1);
    }
    address_ = "127.0.0.1:" + *port;
    for (int i = 1; i <= options.agents; ++i) {
      const std::string host = "node" + std::to_string(i);
      std::vector<std::string> args{JC_NEXEC_AGENT, "--master=" + address_, "--host=" + host,
                                    "--resources=" + options.agent_resources, "--log_level=warn",
                                    "--state_dir=" + (dir / (host + "-state")).string()};
      if (!options.heartbeat.empty()) args.push_back("--heartbeat=" + options.heartbeat);
      args.insert(args.end(), options.extra_flags.begin(), options.extra_flags.end());
      args.insert(args.end(), options.agent_flags.begin(), options.agent_flags.end());
      agents_.push_back(std::make_unique<testing::Process>(args, (dir / (host + ".log")).string()));
    }
    stub_ = ::nexec::v1::Master::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    bool joined = testing::WaitUntil([&] {
      ::nexec::v1::ListHostsRequest req;
      ::nexec::v1::ListHostsResponse resp;
      auto ctx = Context("ListHosts", req);
      return stub_->ListHosts(ctx.get(), req, &resp).ok() && resp.hosts_size() == options.agents;
    });
    if (!joined) {
      std::fprintf(stderr, "the agents did not join\n");
      std::exit(1);
    }
  }

  ::nexec::v1::Master::Stub* stub() { return stub_.get(); }
  // A signed context for one call.
  // A unary call as a long-lived client (the adapter) makes it: in the session it holds with
  // the master, after one munge credential.
  grpc::Status Call(const char* method, const google::protobuf::Message& request,
                    const std::function<grpc::Status(grpc::ClientContext*)>& call) const {
    return auth_.Call(address_, method, request, std::chrono::seconds(30), call);
  }
  int64_t credentials_made() const { return auth_.credentials_made(); }

  // CPU seconds so far, from /proc/<pid>/stat: the master's own, the agents' own, and the
  // agents' reaped children (the tasks, from the start of each child to its exit).
  struct Cpu {
    double master = 0, agents = 0, tasks = 0;
  };
  Cpu CpuSoFar() const {
    Cpu cpu;
    auto read = [](pid_t pid, double* own, double* children) {
      std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
      std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::istringstream fields(stat.substr(stat.rfind(')') + 2));
      std::string f;
      double utime = 0, stime = 0, cutime = 0, cstime = 0;
      for (int i = 3; i <= 17 && fields >> f; ++i) {
        if (i == 14) utime = std::stod(f);
        if (i == 15) stime = std::stod(f);
        if (i == 16) cutime = std::stod(f);
        if (i == 17) cstime = std::stod(f);
      }
      const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
      *own += (utime + stime) / tick;
      if (children != nullptr) *children += (cutime + cstime) / tick;
    };
    read(master_->pid(), &cpu.master, nullptr);
    for (const auto& a : agents_) read(a->pid(), &cpu.agents, &cpu.tasks);
    return cpu;
  }

  // The master's resident memory now, in kB (VmRSS of /proc/<pid>/status).
  long MasterRssKb() const {
    std::ifstream in("/proc/" + std::to_string(master_->pid()) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    }
    return 0;
  }

  std::unique_ptr<grpc::ClientContext> Context(const char* method, const google::protobuf::Message& request,
                                               std::chrono::seconds deadline = std::chrono::seconds(30)) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + deadline);
    (void)auth_.Sign(ctx.get(), method, request);
    return ctx;
  }

 private:
  const nexec::MungeAuth auth_;
  std::string address_;
  std::unique_ptr<testing::Process> master_;
  std::vector<std::unique_ptr<testing::Process>> agents_;
  std::unique_ptr<::nexec::v1::Master::Stub> stub_;
};

}  // namespace jc::bench
