#pragma once

#include <signal.h>

#include <fstream>

// A center for integration tests: the SDK's example adapter (replicas as local processes)
// served over real gRPC on a free loopback port, with its work and state in a temporary
// directory removed at the end. Test binaries that use it link jc_adapter_local.

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "adapters/example/local_backend.h"
#include "adapters/sdk/run_adapter.h"

namespace jc::testing {

struct LocalAdapter {
  std::filesystem::path dir;
  std::unique_ptr<adapter::LocalBackend> backend;
  std::unique_ptr<adapter::AdapterServer> server;
  adapter::AdapterOptions options;  // as it was started
  int cpus = 0;

  // `config` is the center configuration after its center_id line (YAML); "{data_dir}"
  // in it stands for a directory of this adapter's own.
  // `customize` may change the adapter's options (TLS, say) before it starts.
  LocalAdapter(const std::string& center, int cpus, std::string config,
               const std::function<void(adapter::AdapterOptions&)>& customize = {})
      : cpus(cpus) {
    static std::atomic<int> n{0};
    dir = std::filesystem::temp_directory_path() /
          ("jc-adapter-" + center + "-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(dir);
    for (size_t at; (at = config.find("{data_dir}")) != std::string::npos;) {
      config.replace(at, 10, (dir / "data").string());
    }
    backend = std::make_unique<adapter::LocalBackend>((dir / "work").string(), cpus, 8192);
    adapter::AdapterOptions o;
    // A unix socket, as a center's adapter beside its control plane listens: the adapter
    // admits only this process's account (SO_PEERCRED). Tests of TCP and TLS set their own.
    o.listen = "unix:" + (dir / "adapter.sock").string();
    o.metrics_address = "";
    o.state_dir = (dir / "state").string();
    o.poll_interval = absl::Milliseconds(50);
    auto parsed = adapter::ParseCenterConfig("center_id: " + center + "\n" + config);
    INFO(parsed.status().ToString());
    REQUIRE(parsed.ok());
    o.center = *parsed;
    if (customize) customize(o);
    options = o;
    auto s = adapter::AdapterServer::Start(backend.get(), o);
    INFO(s.status().ToString());
    REQUIRE(s.ok());
    server = std::move(*s);
  }
  // Stops the adapter and starts a new one on the same state, work directory and address
  // (a unix socket's path; a TCP port 0 gets another): its replicas run on meanwhile.
  void Restart() {
    Stop();
    backend = std::make_unique<adapter::LocalBackend>((dir / "work").string(), cpus, 8192);
    auto s = adapter::AdapterServer::Start(backend.get(), options);
    INFO(s.status().ToString());
    REQUIRE(s.ok());
    server = std::move(*s);
  }
  std::string address() const { return server->address(); }
  void Stop() {
    if (server) server->Shutdown();
    server.reset();
  }
  ~LocalAdapter() {
    Stop();
    // Replicas outlive their adapter (as at a center); not a test's: whatever still runs
    // here (a stop the adapter never heard) is killed, or it would hold the test's output
    // pipe open and ctest would wait for it.
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "work", ec)) {
      if (std::filesystem::exists(entry.path() / "exit") || std::filesystem::exists(entry.path() / "stopped")) continue;
      std::ifstream pid_file(entry.path() / "pid");
      int pid = 0;
      if (pid_file >> pid && pid > 0) ::kill(-pid, SIGKILL);  // its own session's group
    }
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace jc::testing
