#include "adapters/sdk/run_adapter.h"

#include "adapters/sdk/tunnel.h"

#include "adapters/sdk/peer_socket.h"

#include <unistd.h>

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/service_type.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "adapters/sdk/adapter_core.h"
#include "adapters/sdk/adapter_service.h"
#include "common/auth/adapter_proof.h"
#include "common/admin_server.h"
#include "common/grpc_reflection.h"
#include "common/grpc_server_threads.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/version.h"
#include "common/status_macros.h"
#include "common/store/store.h"

ABSL_FLAG(std::string, listen, "",
          "gRPC address of the adapter: unix:/path (only --allowed_peers may connect), or host:port (port 0: any) with "
          "mutual TLS (--tls_*) or --plaintext; default unix:<state_dir>/adapter.sock");
ABSL_FLAG(std::string, allowed_peers, "",
          "accounts (names or uids, comma-separated) that may connect on a unix: --listen address: the control "
          "plane's; default root and the adapter's own account");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:7101",
          "where /metrics, /healthz and /readyz are served (empty: nowhere)");
ABSL_FLAG(std::string, state_dir, "./adapter-state", "directory of the adapter's embedded store");
ABSL_FLAG(std::string, store, "", "store URI (postgresql://... or sqlite:///...); default: state_dir");
ABSL_FLAG(std::string, center_config, "", "the center's YAML file (id, specs, images, figures)");
ABSL_FLAG(std::string, center_key_file, "",
          "a file (this account's alone, mode 0600) holding the adapter key the control plane issued to this center "
          "(POST /openapi/v1/centers/{id}/adapterkey, or jcctl centers issue-key): the adapter proves its center "
          "with it on every connection. Read at each proof: replace the file to take a new key");
ABSL_FLAG(absl::Duration, poll_interval, absl::Milliseconds(200),
          "how often the center's scheduler is asked for replica states");
ABSL_FLAG(std::string, tls_cert, "", "this adapter's PEM certificate, naming its center (mutual TLS with the control plane)");
ABSL_FLAG(std::string, tls_key, "", "its PEM private key");
ABSL_FLAG(std::string, tls_ca, "", "the PEM CA that signs the control plane's certificate (and this one)");
ABSL_FLAG(std::string, tls_allowed_clients, "jointcloud",
          "comma-separated names (SAN or CN) a client certificate must carry: the control plane's");
ABSL_FLAG(bool, plaintext, false,
          "serve gRPC without TLS on a --listen address other than loopback (without it, such an address needs "
          "--tls_cert, --tls_key and --tls_ca)");
ABSL_FLAG(bool, allow_root_replicas, false,
          "start as root although the center maps no accounts (run_as) and names no user, so that replicas run as "
          "root: development only");

namespace jc::adapter {

namespace {

// Takes calls only from clients whose verified certificate names an allowed client: a
// certificate the CA signed for a center's adapter, say, is not the control plane's.
class AllowedClients final : public grpc::AuthMetadataProcessor {
 public:
  explicit AllowedClients(std::vector<std::string> names) : names_(std::move(names)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata&, grpc::AuthContext* context, OutputMetadata*, OutputMetadata*) override {
    for (const char* property : {"x509_subject_alternative_name", "x509_common_name"}) {
      for (const auto& value : context->FindPropertyValues(property)) {
        std::string name(value.data(), value.size());
        if (std::find(names_.begin(), names_.end(), name) != names_.end()) return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("this adapter takes calls only from the control plane (a client certificate "
                                     "naming one of: ",
                                     absl::StrJoin(names_, ", "), ")"));
  }

 private:
  std::vector<std::string> names_;
};

}  // namespace

struct AdapterServer::Impl {
  std::shared_ptr<const auth::TlsMaterial> tls;  // its file watcher lives as long as the server
  std::unique_ptr<store::Store> store;
  std::unique_ptr<AdapterCore> core;
  std::unique_ptr<grpc::Service> service;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<AdminServer> admin;
  std::unique_ptr<PeerCheckedSocket> unix_socket;
  std::string address;
  int port = 0;
  int metrics_port = 0;
  bool down = false;
};

AdapterServer::AdapterServer() : impl_(std::make_unique<Impl>()) {}
AdapterServer::~AdapterServer() { Shutdown(); }
int AdapterServer::port() const { return impl_->port; }
std::string AdapterServer::address() const { return impl_->address; }
int AdapterServer::metrics_port() const { return impl_->metrics_port; }
AdapterCore& AdapterServer::core() { return *impl_->core; }

absl::StatusOr<std::unique_ptr<AdapterServer>> AdapterServer::Start(Backend* backend,
                                                                    AdapterOptions options) {
  if (options.center.center_id.empty()) {
    return absl::InvalidArgumentError("the adapter needs a center configuration with a center_id");
  }
  std::unique_ptr<AdapterServer> s(new AdapterServer());
  Impl& impl = *s->impl_;
  std::string uri = options.store;
  if (uri.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.state_dir, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot create state_dir ", options.state_dir, ": ", ec.message()));
    uri = "sqlite://" + std::filesystem::absolute(std::filesystem::path(options.state_dir) / "adapter.db").string();
  }
  JC_ASSIGN_OR_RETURN(impl.store, store::OpenStore(uri));
  CoreOptions core_options;
  core_options.poll_interval = options.poll_interval;
  impl.core = std::make_unique<AdapterCore>(backend, options.center, impl.store.get(), core_options);
  impl.registry = std::make_shared<prometheus::Registry>();
  impl.core->EnableMetrics(*impl.registry);
  JC_RETURN_IF_ERROR(impl.core->Start());

  if (!options.center_key_file.empty() && UnixSocketPath(options.listen).empty() && !options.tls.enabled()) {
    // The proof answers whoever asks: it proves the center only while no one but the
    // control plane can ask (a unix socket's allowed peers, mutual TLS's allowed clients).
    // On plaintext TCP a process posing as this adapter could ask it and relay the answer.
    return absl::FailedPreconditionError(absl::StrCat(
        "--center_key_file on plaintext TCP (", options.listen,
        ") proves nothing: anyone reaching the adapter could have it answer a challenge and relay the proof; "
        "listen on a unix: socket (--allowed_peers) or with mutual TLS (--tls_*)"));
  }
  if (!options.center_key_file.empty()) {
    // Checked at the start: a key the adapter cannot read would refuse every call later.
    JC_RETURN_IF_ERROR(auth::ReadAdapterKeyFile(options.center_key_file).status());
  }
  impl.service = MakeAdapterService(impl.core.get(), options.center_key_file);
  grpc::EnableDefaultHealthCheckService(true);
  EnableGrpcReflection();
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls.enabled()) {
    JC_ASSIGN_OR_RETURN(impl.tls, auth::LoadTls(options.tls));
    credentials = auth::ServerCredentials(impl.tls.get(), GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    credentials->SetAuthMetadataProcessor(std::make_shared<AllowedClients>(options.allowed_clients));
  }
  const std::string unix_path = UnixSocketPath(options.listen);
  if (unix_path.empty()) builder.AddListeningPort(options.listen, credentials, &impl.port);
  builder.RegisterService(impl.service.get());
  // Calls get kAdapterCallThreads whatever the tunnels hold: a tunnel past its cap takes a
  // thread only long enough to be refused.
  ConfigureServerThreads(builder, "adapter", kAdapterCallThreads + kMaxOpenTunnels + 8);
  impl.server = builder.BuildAndStart();
  if (!impl.server || (unix_path.empty() && impl.port == 0)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  if (!unix_path.empty()) {
    // The kernel names each caller: only the allowed accounts get through to gRPC.
    std::set<uid_t> allowed = options.allowed_peers;
    if (allowed.empty()) allowed = {0, geteuid()};
    JC_ASSIGN_OR_RETURN(impl.unix_socket, PeerCheckedSocket::Listen(unix_path, allowed, impl.server.get()));
    impl.address = "unix:" + unix_path;
  } else {
    const std::string host = options.listen.substr(0, options.listen.rfind(':'));
    impl.address = absl::StrCat(host.empty() || host == "0.0.0.0" || host == "[::]" ? "127.0.0.1" : host, ":", impl.port);
  }
  if (!options.metrics_address.empty()) {
    store::Store* st = impl.store.get();
    Backend* b = backend;
    impl.admin = std::make_unique<AdminServer>(impl.registry, [st, b] {
      // Ready when the store answers and the center's scheduler does.
      JC_RETURN_IF_ERROR(st->Ping());
      return b->GetUsage().status();
    });
    JC_ASSIGN_OR_RETURN(impl.metrics_port, impl.admin->Start(options.metrics_address));
    const std::string metrics_host = options.metrics_address.substr(0, options.metrics_address.rfind(':'));
    spdlog::info("adapter for center {} metrics on http://{}:{}/metrics", options.center.center_id,
                 metrics_host.empty() || metrics_host == "0.0.0.0" ? "127.0.0.1" : metrics_host, impl.metrics_port);
  }
  if (unix_path.empty()) {
    spdlog::info("adapter for center {} listening on port {}", options.center.center_id, impl.port);
  } else {
    spdlog::info("adapter for center {} listening on {}", options.center.center_id, impl.address);
  }
  return s;
}

void AdapterServer::Shutdown() {
  if (impl_->down) return;
  impl_->down = true;
  if (impl_->admin) impl_->admin->Stop();
  impl_->unix_socket.reset();  // no new connections
  // Watches end when the core closes its event log; then the server drains.
  if (impl_->core) impl_->core->Stop();
  if (impl_->server) impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

int RunAdapter(Backend& backend, AdapterOptions options) {
  daemon::BlockStopSignals();  // ParseAdapterFlags did; a main of its own may not have
  const CenterConfig& center = options.center;
  if (geteuid() == 0 && !center.run_as.configured && center.user.empty()) {
    if (!options.allow_root_replicas) {
      spdlog::error(
          "adapter cannot start: it runs as root and center {}'s configuration maps no local accounts, so replicas "
          "would run as root. Add run_as (projects/users/default -> accounts) or a default user to it (see "
          "docs/security.md), run the adapter as an ordinary account, or pass --allow_root_replicas (development "
          "only)",
          center.center_id);
      return 1;
    }
    spdlog::warn("--allow_root_replicas: center {}'s replicas run as root; for development only", center.center_id);
  }
  const bool allow_root = options.allow_root_replicas;
  auto server = AdapterServer::Start(&backend, std::move(options));
  if (!server.ok()) {
    spdlog::error("adapter cannot start: {}", server.status().message());
    return 1;
  }
  daemon::WaitForStop("adapter", [&] {
    // SIGHUP: the center's run_as mapping is read again (the rest needs a restart).
    std::string path = absl::GetFlag(FLAGS_center_config);
    auto reloaded = LoadCenterConfig(path);
    if (!reloaded.ok()) {
      spdlog::error("SIGHUP: {} not reloaded, run_as unchanged: {}", path, reloaded.status().message());
      return;
    }
    if (geteuid() == 0 && !reloaded->run_as.configured && reloaded->user.empty() && !allow_root) {
      spdlog::error("SIGHUP: {} maps no accounts, so replicas would run as root; run_as unchanged", path);
      return;
    }
    (*server)->core().SetRunAs(reloaded->run_as);
    spdlog::info("SIGHUP: run_as of center {} reloaded from {}", reloaded->center_id, path);
  });
  (*server)->Shutdown();
  return 0;
}

AdapterOptions ParseAdapterFlags(int argc, char** argv, const char* usage) {
  daemon::Begin(std::filesystem::path(argv[0]).filename().string(), usage, argc, argv);
  AdapterOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  o.state_dir = absl::GetFlag(FLAGS_state_dir);
  o.store = absl::GetFlag(FLAGS_store);
  o.poll_interval = absl::GetFlag(FLAGS_poll_interval);
  o.allow_root_replicas = absl::GetFlag(FLAGS_allow_root_replicas);
  o.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)};
  o.allowed_clients = absl::StrSplit(absl::GetFlag(FLAGS_tls_allowed_clients), ',', absl::SkipWhitespace());
  o.center_key_file = absl::GetFlag(FLAGS_center_key_file);
  if (o.listen.empty()) o.listen = "unix:" + std::filesystem::absolute(std::filesystem::path(o.state_dir) / "adapter.sock").string();
  auto peers = ParseAllowedPeers(absl::GetFlag(FLAGS_allowed_peers));
  if (!peers.ok()) {
    spdlog::error("{}", peers.status().message());
    std::exit(2);
  }
  o.allowed_peers = *peers;
  // Whoever reaches a plaintext adapter can run replicas at its center — on loopback too,
  // every account of the host and every replica it runs: that takes a unix socket (the
  // kernel names the caller), mutual TLS, or saying so.
  if (UnixSocketPath(o.listen).empty() && !o.tls.enabled() && !absl::GetFlag(FLAGS_plaintext)) {
    spdlog::error("--listen={} without TLS would take calls from whoever reaches it (on loopback: every account and "
                  "replica on this host): use --listen=unix:/path (only --allowed_peers may connect), give "
                  "--tls_cert, --tls_key and --tls_ca (mutual TLS with the control plane), or --plaintext for "
                  "development",
                  o.listen);
    std::exit(2);
  }
  if (absl::GetFlag(FLAGS_plaintext) && UnixSocketPath(o.listen).empty() && !o.tls.enabled()) {
    spdlog::warn("--plaintext: anyone who reaches {} can run replicas at this center; for development only", o.listen);
  }
  if (absl::GetFlag(FLAGS_center_config).empty()) {
    spdlog::error("--center_config is required: the center's id, specs and figures (docs/adapter-sdk.md)");
    std::exit(2);
  }
  auto center = LoadCenterConfig(absl::GetFlag(FLAGS_center_config));
  if (!center.ok()) {
    spdlog::error("{}", center.status().message());
    std::exit(2);
  }
  o.center = *center;
  return o;
}

}  // namespace jc::adapter
