#pragma once

// A native center for integration tests: a real nexec master and one agent on loopback
// (signed with a private munged), and, on demand, the native adapter over them on a unix
// socket, all in a temporary directory removed at the end. Test binaries that use it link
// jc_adapter_native and jc_process, define JC_NEXEC_MASTER and JC_NEXEC_AGENT (the binaries'
// paths) and depend on nexec-master and nexec-agent.

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "adapters/native/nexec_backend.h"
#include "adapters/sdk/run_adapter.h"
#include "tests/testing/munge_daemon.h"
#include "tests/testing/process.h"

namespace jc::testing {

struct NexecCenter {
  std::filesystem::path dir;
  std::unique_ptr<Process> master, agent;
  std::string address;  // the master's
  std::unique_ptr<adapter::NexecBackend> backend;
  std::unique_ptr<adapter::AdapterServer> adapter;

  // One host of `cpus` CPUs and 8 GiB; `agent_flags` for its agent (a registry's, say).
  explicit NexecCenter(const std::string& name = "center", int cpus = 4,
                       const std::vector<std::string>& agent_flags = {}) {
    static std::atomic<int> n{0};
    UsePrivateMunged();  // the master, agent and backends all sign with it
    dir = std::filesystem::temp_directory_path() /
          ("jc-nexec-" + name + "-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(dir);
    master = std::make_unique<Process>(std::vector<std::string>{JC_NEXEC_MASTER, "--listen=127.0.0.1:0",
                                                                "--metrics_address=",
                                                                "--data_dir=" + (dir / "data").string()},
                                       (dir / "master.log").string());
    auto port = master->WaitForLog(R"(nexec master listening on port (\d+))");
    INFO(master->Log());
    REQUIRE(port);
    address = "127.0.0.1:" + *port;
    std::vector<std::string> agent_args{JC_NEXEC_AGENT, "--master=" + address, "--host=" + name + "-node1",
                                        "--resources=cpus=" + std::to_string(cpus) + ",mem=8G",
                                        "--state_dir=" + (dir / "agent-state").string()};
    agent_args.insert(agent_args.end(), agent_flags.begin(), agent_flags.end());
    agent = std::make_unique<Process>(agent_args, (dir / "agent.log").string());
    adapter::NexecBackend probe(address, "", nexec::MungeAuth::Munge(""));
    bool joined = WaitUntil([&] {
      auto info = probe.Describe();
      return info.ok() && info->capacity().cpu() == cpus;
    });
    INFO(agent->Log());
    REQUIRE(joined);
  }

  // A client of the master as this process's account: the center's own users' work.
  std::unique_ptr<adapter::NexecBackend> Client() const {
    return std::make_unique<adapter::NexecBackend>(address, "", nexec::MungeAuth::Munge(""));
  }

  // Starts the native adapter over the master: `config` is the center configuration (YAML,
  // center_id included).
  std::string StartAdapter(const std::string& config) {
    backend = Client();
    adapter::AdapterOptions o;
    o.listen = "unix:" + (dir / "adapter.sock").string();
    o.metrics_address = "";
    o.state_dir = (dir / "adapter-state").string();
    o.poll_interval = absl::Milliseconds(50);
    auto parsed = adapter::ParseCenterConfig(config);
    INFO(parsed.status().ToString());
    REQUIRE(parsed.ok());
    o.center = *parsed;
    auto started = adapter::AdapterServer::Start(backend.get(), o);
    INFO(started.status().ToString());
    REQUIRE(started.ok());
    adapter = std::move(started).value();
    return adapter->address();
  }

  ~NexecCenter() {
    if (adapter) adapter->Shutdown();
    adapter.reset();
    agent.reset();
    master.reset();
    WaitUntil([&] {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      return !ec;
    });
  }
};

}  // namespace jc::testing
