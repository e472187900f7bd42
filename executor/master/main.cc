// nexec-master: the executor's scheduler daemon.

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_reflection.h"
#include "common/grpc_server_threads.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/version.h"
#include "common/admin_server.h"
#include "common/store/store.h"
#include "executor/auth/answer_signer.h"
#include "executor/master/master.h"
#include "executor/master/master_lease.h"
#include "executor/master/master_service.h"
#include "executor/master/standby_service.h"

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
ABSL_FLAG(std::string, advertise, "",
          "the address agents, the CLI and adapters reach this master at, which standbys name as the leader "
          "(default: --listen, with this host's name for a wildcard host)");
ABSL_FLAG(absl::Duration, lease_ttl, absl::Seconds(10),
          "several masters on one PostgreSQL store: how long the leader's lease lasts unrenewed; a leader that "
          "cannot renew it within 3/4 of this stops, and a standby leads once it ends (failover within about "
          "this plus 1 s)");
ABSL_FLAG(bool, agent_streams, true,
          "serve the agents' streams (Master.AgentStream: each agent's heartbeats and launches on one call held "
          "open); false: agents heartbeat by calls and are launched by calls, as with a master of an earlier "
          "release (for a proxy between master and agents that cannot hold a stream)");
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
  // Launches go down an agent's stream when it holds one open (issue 48), else by a call.
  auto agent_streams = std::make_shared<jc::nexec::AgentStreams>();
  auto dialer = jc::nexec::MakeStreamingDialer(jc::nexec::MakeGrpcAgentDialer(*auth), agent_streams);
  const absl::Duration lease_ttl = absl::GetFlag(FLAGS_lease_ttl);
  if (lease_ttl < absl::Seconds(1)) return fail("--lease_ttl must be at least 1s");
  auto registry = std::make_shared<prometheus::Registry>();

  // Standing by (issue 47): the listen address answers who leads, and nothing else, until
  // this master holds the store's nexec_master lease.
  std::unique_ptr<jc::nexec::MasterLease> lease;
  std::atomic<jc::nexec::MasterLease*> made{nullptr};  // set once the lease is made
  auto standby_service = jc::nexec::MakeStandbyService([&made] {
    jc::nexec::MasterLease* l = made.load();
    // A call in the moment between the listen and the lease's making: nothing known yet.
    if (l == nullptr) {
      nexec::v1::LeadershipInfo starting;
      starting.set_state("starting");
      return starting;
    }
    return l->Info();
  }, *auth);
  int port = 0;
  std::unique_ptr<grpc::Server> standby;
  {
    grpc::ServerBuilder builder;
    // One process per address: with SO_REUSEPORT two masters given one address would share it.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(absl::GetFlag(FLAGS_listen), grpc::InsecureServerCredentials(), &port);
    builder.RegisterCallbackGenericService(standby_service.get());
    standby = builder.BuildAndStart();
    if (standby == nullptr || port == 0) return fail("cannot listen on " + absl::GetFlag(FLAGS_listen));
  }
  const std::string listen_host = absl::GetFlag(FLAGS_listen).substr(0, absl::GetFlag(FLAGS_listen).rfind(':'));
  std::string advertise = absl::GetFlag(FLAGS_advertise);
  if (advertise.empty()) {
    std::string host = listen_host;
    if (host.empty() || host == "0.0.0.0" || host == "[::]") {
      char name[256] = {0};
      host = gethostname(name, sizeof(name) - 1) == 0 && name[0] != 0 ? name : "localhost";
    }
    advertise = absl::StrCat(host, ":", port);
  }
  lease = std::make_unique<jc::nexec::MasterLease>(store->get(), advertise, lease_ttl);
  made = lease.get();
  lease->EnableMetrics(*registry);
  jc::nexec::MasterLease* leadership = lease.get();
  auto admin = jc::daemon::ServeAdmin("nexec master", absl::GetFlag(FLAGS_metrics_address), registry,
                                      [s = store->get(), leadership]() -> absl::Status {
                                        if (!leadership->leading()) {
                                          return absl::UnavailableError(leadership->Info().state());
                                        }
                                        return s->Ping();
                                      });
  if (!admin.ok()) return fail(std::string(admin.status().message()));
  {
    std::string why, said;
    const absl::Time started = absl::Now();
    while (!lease->TryLead(&why)) {
      // Said again when who holds it changes, not each time its hold is renewed.
      if (!why.empty() && why.substr(0, why.find(" (until")) != said) {
        spdlog::warn("nexec master {}: {}", advertise, why);
        said = why.substr(0, why.find(" (until"));
      }
      // SQLite is one machine's file: a second master there is a mistake, not a standby. A
      // lease still held after its TTL is another live master's (a crashed one's ends).
      if ((*store)->backend() == "sqlite" && absl::Now() - started > lease_ttl + absl::Seconds(1)) {
        auto holder = lease->Holder();
        return fail(absl::StrCat("another nexec master (",
                                 holder.ok() ? jc::nexec::MasterLease::AddressOfHolder(holder->first) : "unknown",
                                 ") leads on this SQLite store; several masters (a standby) need a PostgreSQL store "
                                 "(--store=postgresql://...)"));
      }
      if (jc::daemon::PollStop("nexec master", absl::Milliseconds(200)) != 0) {
        if (*admin) (*admin)->Stop();
        standby->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
        return 0;
      }
    }
  }
  spdlog::info("nexec master {} leads (term {})", advertise, lease->term());

  jc::nexec::MasterOptions leading_options = options;
  leading_options.term = lease->term();
  leading_options.fence = [leadership](jc::store::Transaction& txn) { return leadership->Fence(txn); };
  jc::nexec::Master master(store->get(), jc::RealClock::Get(), dialer.get(), config, leading_options);
  // From now on a lease that cannot be kept ends this process: its memory is of a term that
  // is over (a restart stands by, and reloads from the store when it leads again).
  lease->KeepLeading([advertise](const absl::Status& why) {
    spdlog::critical("nexec master {}: {}; exiting so that it acts on nothing more (restarted, it stands by)",
                     advertise, why.message());
    spdlog::default_logger()->flush();
    std::_Exit(4);
  });
  if (auto s = master.Recover(); !s.ok()) return fail("recovery failed: " + s.ToString());
  lease->SetIdentity(master.identity());

  // Without streams (--agent_streams=false) AgentStream answers UNIMPLEMENTED, as a master
  // of an earlier release does: the agents call, and their launches are calls (the gauges
  // stay at 0).
  auto service = jc::nexec::MakeMasterService(&master, *auth, agent_uid, [leadership] { return leadership->Info(); },
                                              absl::GetFlag(FLAGS_agent_streams) ? agent_streams : nullptr);
  jc::EnableGrpcReflection();
  standby->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  standby.reset();
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int leading_port = 0;
  builder.AddListeningPort(absl::StrCat(listen_host, ":", port), grpc::InsecureServerCredentials(), &leading_port);
  builder.RegisterService(service.get());
  {
    // Answers in a session are signed: agents and the adapter act on no other (issue 47).
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(jc::nexec::MakeAnswerSigner(*auth));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  jc::ConfigureServerThreads(builder, "nexec-master", 256);
  auto server = builder.BuildAndStart();
  if (server == nullptr || leading_port == 0) return fail(absl::StrCat("cannot listen on ", listen_host, ":", port));
  master.EnableMetrics(*registry);
  agent_streams->EnableMetrics(*registry);
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
  // Given up once nothing more is written: a standby leads at once, not after the TTL.
  lease->Release();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
