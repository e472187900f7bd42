#pragma once

// The real binaries as processes for end-to-end tests: a `jointcloud` server on free
// loopback ports (on the suite's store: embedded, or a fresh PostgreSQL schema), a
// jc-adapter-local center, and any command run to its end with its output captured.

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/process.h"
#include "tests/testing/test_store.h"

namespace jc::testing {

struct ServerProcess {
  std::unique_ptr<Process> process;
  int rest_port = 0;
  int grpc_port = 0;
};

// `binary` is JC_SERVER_BINARY; `dir` holds its data (embedded store) and admin.token;
// `schema` names its PostgreSQL schema (same name: same data across restarts).
inline ServerProcess StartServerProcess(const std::string& binary, const std::string& dir, const std::string& schema,
                                        const std::string& log, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{binary,
                                "--rest_address=127.0.0.1:0",
                                "--grpc_address=127.0.0.1:0",
                                "--admin_address=127.0.0.1:0",
                                "--monitor_interval=100ms",
                                "--scheduler_refresh=50ms",
                                "--admin_token_file=" + dir + "/admin.token"};
  if (TestStoreBackend() == "postgres") {
    args.push_back("--store=" + std::string(std::getenv("JC_TEST_PG_URI")));
    args.push_back("--store_schema=" + schema + "_" + std::to_string(getpid()));
  } else {
    args.push_back("--data_dir=" + dir + "/data");
  }
  args.insert(args.end(), extra.begin(), extra.end());
  ServerProcess s;
  s.process = std::make_unique<Process>(args, dir + "/" + log);
  auto rest = s.process->WaitForLog(R"(rest listening on http://127\.0\.0\.1:(\d+))");
  auto grpc = s.process->WaitForLog(R"(grpc listening on port (\d+))");
  INFO(s.process->Log());
  REQUIRE(rest.has_value());
  REQUIRE(grpc.has_value());
  // Ready: the job manager leads (before that, creates answer 503 with Retry-After).
  REQUIRE(s.process->WaitForLog("jointcloud ready").has_value());
  s.rest_port = std::stoi(*rest);
  s.grpc_port = std::stoi(*grpc);
  return s;
}

// jc-adapter-local (`binary`) for center `center` with `cpus` CPUs and spec cpu-1; its
// address is 127.0.0.1:*port.
inline std::unique_ptr<Process> StartLocalAdapterProcess(const std::string& binary, const std::string& dir,
                                                         const std::string& center, int cpus, int* port) {
  std::ofstream(dir + "/" + center + ".yaml")
      << "center_id: " << center << "\nsecurity_grade: 3\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 256Mi}\n";
  auto adapter = std::make_unique<Process>(
      std::vector<std::string>{binary, "--listen=127.0.0.1:0", "--plaintext", "--metrics_address=",
                               "--state_dir=" + dir + "/adapter-" + center, "--work_dir=" + dir + "/replicas-" + center,
                               "--center_config=" + dir + "/" + center + ".yaml", "--cpus=" + std::to_string(cpus),
                               "--memory_mb=4096", "--poll_interval=50ms", "--allow_root_replicas"},
      dir + "/adapter-" + center + ".log");
  auto listening = adapter->WaitForLog(R"(listening on port (\d+))");
  INFO(adapter->Log());
  REQUIRE(listening.has_value());
  *port = std::stoi(*listening);
  return adapter;
}

struct Ran {
  int code = -1;  // the exit code, 128 + signal when killed
  std::string out;
  std::string err;
};

// Runs `argv` to its end with stdin from /dev/null, `env` added and HOME set to `dir`
// (where its output files go too).
inline Ran RunCaptured(const std::string& dir, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env = {}) {
  static int n = 0;
  std::string out = dir + "/run." + std::to_string(++n) + ".out", err = dir + "/run." + std::to_string(n) + ".err";
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = open("/dev/null", O_RDONLY);
    dup2(o, 1);
    dup2(e, 2);
    dup2(in, 0);
    for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
    setenv("HOME", dir.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  Ran r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace jc::testing
