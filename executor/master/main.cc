// nexec-master: the executor's scheduler daemon.

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "common/grpc_reflection.h"
#include "common/grpc_server_threads.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/version.h"
#include "common/admin_server.h"
#include "common/store/store.h"
#include "executor/master/master.h"
#include "executor/master/master_service.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:6800", "gRPC address for the CLI, adapters and agents");
ABSL_FLAG(std::string, config, "", "YAML configuration (queues, host types, hosts); default: one queue");
ABSL_FLAG(std::string, data_dir, "./nexec-data", "directory of the embedded store");
ABSL_FLAG(std::string, store, "", "store URI (postgresql://... or sqlite:///...); default: data_dir");
ABSL_FLAG(std::string, store_schema, "", "PostgreSQL schema for the executor's tables");
ABSL_FLAG(absl::Duration, host_timeout, absl::Seconds(10), "silence before a host is unavailable");
ABSL_FLAG(absl::Duration, clean_period, absl::Hours(1),
          "how long an ended job stays in the master's memory and lists (LSF's CLEAN_PERIOD); after it, "
          "nexec job, logs and adapters read its record from the store's history. 0: no time limit");
ABSL_FLAG(int64_t, max_ended_jobs, 100000,
          "at most this many ended jobs in memory: past it the oldest leave before --clean_period is over. 0: no bound");
ABSL_FLAG(std::string, log_dir, "", "default directory of job output (default: data_dir/logs)");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:6801",
          "where /metrics, /healthz and /readyz are served (empty: nowhere)");
ABSL_FLAG(std::string, sensor_dir, "",
          "directory with ress.master, the resource sensor the master runs for cluster resources (RESS)");
ABSL_FLAG(std::string, auth, "munge",
          "how callers prove who they are: munge, or none (development only: every caller is root)");
ABSL_FLAG(std::string, munge_socket, "", "munged's socket (default: $NEXEC_MUNGE_SOCKET, else munge's own)");
ABSL_FLAG(int64_t, agent_uid, -1, "the account agents run as; heartbeats from others are refused "
          "(default: the master's own account; root is always accepted)");

int main(int argc, char** argv) {
  jc::daemon::Begin("nexec-master", "nexec-master --listen=127.0.0.1:6800 [--config=nexec.yaml]", argc, argv);
  auto fail = [](const std::string& m) {
    spdlog::error("{}", m);
    return 1;
  };
  jc::nexec::ExecutorConfig config = jc::nexec::DefaultConfig();
  if (!absl::GetFlag(FLAGS_config).empty()) {
    auto loaded = jc::nexec::LoadConfigFile(absl::GetFlag(FLAGS_config));
    if (!loaded.ok()) return fail(std::string(loaded.status().message()));
    config = *loaded;
  }
  std::filesystem::path dir = absl::GetFlag(FLAGS_data_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail("cannot create --data_dir " + dir.string() + ": " + ec.message());
  std::string uri = absl::GetFlag(FLAGS_store);
  if (uri.empty()) uri = "sqlite://" + std::filesystem::absolute(dir / "nexec.db").string();
  auto store = jc::store::OpenStore(uri, absl::GetFlag(FLAGS_store_schema));
  if (!store.ok()) return fail(std::string(store.status().message()));

  jc::nexec::MasterOptions options;
  options.host_timeout = absl::GetFlag(FLAGS_host_timeout);
  options.clean_period = absl::GetFlag(FLAGS_clean_period);
  if (options.clean_period < absl::ZeroDuration()) return fail("--clean_period must not be negative (0: never clean)");
  options.max_ended_jobs = absl::GetFlag(FLAGS_max_ended_jobs);
  if (options.max_ended_jobs < 0) return fail("--max_ended_jobs must not be negative (0: no bound)");
  options.sensor_dir = absl::GetFlag(FLAGS_sensor_dir);
  options.log_dir = absl::GetFlag(FLAGS_log_dir).empty()
                        ? std::filesystem::absolute(dir / "logs").string()
                        : absl::GetFlag(FLAGS_log_dir);
  auto auth = jc::nexec::MungeAuthFromFlags(absl::GetFlag(FLAGS_auth), absl::GetFlag(FLAGS_munge_socket));
  if (!auth.ok()) return fail(std::string(auth.status().message()));
  if (!auth->enabled()) {
    spdlog::warn("--auth=none: every caller is trusted as root; for development only");
  } else if (auto probe = auth->Encode("nexec-master"); !probe.ok()) {
    return fail(std::string(probe.status().message()));
  }
  uid_t agent_uid = absl::GetFlag(FLAGS_agent_uid) >= 0 ? static_cast<uid_t>(absl::GetFlag(FLAGS_agent_uid)) : geteuid();
  auto dialer = jc::nexec::MakeGrpcAgentDialer(*auth);
  jc::nexec::Master master(store->get(), jc::RealClock::Get(), dialer.get(), config, options);
  if (auto s = master.Recover(); !s.ok()) return fail("recovery failed: " + s.ToString());

  auto service = jc::nexec::MakeMasterService(&master, *auth, agent_uid);
  jc::EnableGrpcReflection();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service.get());
  jc::ConfigureServerThreads(builder, "nexec-master", 256);
  auto server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return fail("cannot listen on " + absl::GetFlag(FLAGS_listen));
  auto registry = std::make_shared<prometheus::Registry>();
  master.EnableMetrics(*registry);
  jc::store::Store* s = store->get();
  auto admin = jc::daemon::ServeAdmin("nexec master", absl::GetFlag(FLAGS_metrics_address), registry,
                                      [s] { return s->Ping(); });
  if (!admin.ok()) return fail(std::string(admin.status().message()));
  master.Start();
  spdlog::info("nexec master listening on port {}", port);

  jc::daemon::WaitForStop("nexec master", [&master] {
    // SIGHUP: reload the configuration file; jobs are kept whatever happens.
    if (absl::GetFlag(FLAGS_config).empty()) {
      spdlog::warn("SIGHUP: no --config file to reload");
      return;
    }
    auto loaded = jc::nexec::LoadConfigFile(absl::GetFlag(FLAGS_config));
    absl::Status applied = loaded.ok() ? master.Reconfigure(*loaded) : loaded.status();
    if (!applied.ok()) spdlog::error("reload refused, configuration unchanged: {}", applied.message());
  });
  if (*admin) (*admin)->Stop();
  master.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
