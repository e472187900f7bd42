#pragma once

// Wires the services one `jointcloud` process runs: the store, the gRPC server with the
// chosen northbound services, in-process channels between them, the REST gateway and the
// background health sweep. main() and the integration tests share it.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/oci/registry_client.h"
#include "common/watch_hub.h"
#include "common/store/store.h"
#include "common/admin_server.h"
#include "services/endpoints/endpoint_passes.h"
#include "services/endpoints/endpoint_proxy.h"
#include "services/gateway/gateway.h"
#include "common/auth/call_admission.h"
#include "common/auth/tls.h"
#include "services/identity/authenticator.h"
#include "services/identity/identity_store.h"
#include "services/monitor/monitor.h"
#include "services/accounting/reconciliation.h"
#include "services/accounting/settlement.h"
#include "services/accounting/usage_book.h"
#include "services/accounting/utilisation.h"
#include "services/jobs/job_manager.h"
#include "services/scheduler/scheduler.h"
#include "services/registry/center_directory.h"
#include "services/registry/registry.h"

namespace grpc {
class Server;
class Channel;
class Service;
}  // namespace grpc

namespace jc::catalog {
class Catalog;
}
namespace jc::datamon {
class Datamon;
}

namespace jc::server {

// Authentication and identities (SPEC C6, docs/security.md).
struct AuthOptions {
  // False only by --insecure_no_auth: every call runs as an anonymous admin.
  bool enabled = true;
  // What Jointcloud's services present to each other; empty: a random one for this
  // process (enough when every service runs in it). Processes that call each other share
  // one through --service_token_file.
  std::string service_secret;
  std::shared_ptr<const auth::JwtVerifier> oidc;  // null: OIDC tokens refused
  identity::OidcClaimNames claims;
  // On a store with no user yet, the first start creates the federation admin "admin" with
  // an API token and writes the token here (mode 0600). Empty: no bootstrap.
  std::string bootstrap_token_file;
  identity::IdentityOptions identities;
  // TLS for REST and gRPC and mutual TLS between Jointcloud's processes; none: plaintext.
  auth::TlsFiles tls;
  // Each user's request rate (admins and services are not limited); per_second 0: none.
  auth::RateLimit rate_limit{200, 400};
};

// Every service name --services accepts, in start order.
const std::vector<std::string>& KnownServices();
// Parses "all" or a comma list; unknown names are InvalidArgument.
absl::StatusOr<std::set<std::string>> ParseServices(const std::string& list);

struct AppOptions {
  std::set<std::string> services;
  std::string grpc_address = "127.0.0.1:50051";  // port 0 picks a free one
  std::string rest_host = "127.0.0.1";
  int rest_port = 8080;  // 0 picks a free one
  // Store: an open one (tests), or a URI to open.
  std::unique_ptr<store::Store> store;
  std::string store_uri;
  std::string store_schema;  // PostgreSQL schema to keep the tables in (default: public)
  // Where services not in this process live (host:port of a jointcloud gRPC server).
  // upstream_address stands for any of the three not named on its own.
  std::string registry_address;
  std::string catalog_address;
  std::string datamon_address;
  std::string monitor_address;
  std::string scheduler_address;
  std::string jobs_address;
  std::string identity_address;
  std::string upstream_address;
  AuthOptions auth;
  registry::RegistryOptions registry;
  std::map<std::string, double> migration_weights;
  monitor::MonitorOptions monitor;
  // How the monitor and the job manager reach adapters; null: over gRPC (tests may
  // inject a fake).
  southbound::AdapterClient* adapter_client = nullptr;
  // Refuse a center that was issued no adapter key (--require_adapter_key): its adapter is
  // otherwise known by the id it reports alone (issue 44, hole 5).
  bool require_adapter_key = false;
  // The gateway calls the job service's unary methods directly when both run here (ADR
  // 0014), through the same admission as the gRPC interceptor; false: over the in-process
  // gRPC channel, as every other service.
  bool gateway_direct_calls = true;
  absl::Duration scheduler_refresh = absl::Seconds(1);
  // Placement explanations kept in the store for the newest jobs (issue 49); 0: memory only.
  int placement_history = 100000;
  // Weight profiles (YAML) on top of the built-in ones, reread when the file changes.
  std::string weight_profiles_file;
  jobs::JobManagerOptions jobs;
  // The duration estimator's bounds (SPEC A16): its keys, and each project's share of them.
  estimator::EstimatorOptions estimator;
  gateway::GatewayOptions gateway;
  // The endpoint listener (SPEC A17), where the jobs service runs: host:port (port 0 picks a
  // free one); empty host: none, and OpenEndpoint is refused.
  std::string endpoint_host;
  int endpoint_port = 0;
  endpoints::EndpointProxyOptions endpoints;
  endpoints::PassOptions endpoint_passes;
  // Where the console's charts read their history (Prometheus's base URL); empty: none.
  std::string prometheus_url;
  // A process without the gateway still serves /metrics, /healthz and /readyz here
  // (port 0 picks a free one; an empty host turns it off).
  std::string admin_host = "127.0.0.1";
  int admin_port = 9090;
  absl::Duration health_sweep_interval = absl::Seconds(1);
  // Watch streams (WatchTrainJobs, WatchCenters and the REST event streams): open streams
  // per caller (--max_watches_per_caller).
  WatchHubOptions watches;
  // How the catalog asks registries what an image reference is (--registry_ca_file,
  // --registry_auth_file, --registry_timeout, --registry_max_manifest_bytes, --registry_max_concurrent).
  oci::RegistryOptions registries;
  const Clock* clock = RealClock::Get();
};

class App {
 public:
  static absl::StatusOr<std::unique_ptr<App>> Start(AppOptions options);
  ~App();

  void Shutdown();
  int grpc_port() const { return grpc_port_; }
  int rest_port() const { return rest_port_; }
  // The endpoint listener's port (0 when there is none).
  int endpoint_port() const { return endpoint_port_; }
  endpoints::EndpointProxy* endpoints() const { return endpoints_.get(); }
  // The port of /metrics, /healthz and /readyz: the gateway's or the admin server's.
  int admin_port() const { return admin_port_; }
  // A channel to this process's gRPC services, as Jointcloud's own services call them.
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  registry::Registry* registry() const { return registry_.get(); }
  monitor::Monitor* monitor() const { return monitor_.get(); }
  scheduler::Scheduler* scheduler() const { return scheduler_.get(); }
  jobs::JobManager* jobs() const { return jobs_.get(); }
  identity::IdentityStore* identities() const { return identities_.get(); }
  audit::AuditLog* audit() const { return audit_.get(); }
  // The REST gateway when this process runs it (its routes are the API's table).
  const gateway::Gateway* gateway() const { return gateway_.get(); }
  // The admin token the first start created (empty when users already existed).
  const std::string& bootstrap_token() const { return bootstrap_token_; }
  std::shared_ptr<prometheus::Registry> metrics() const { return metrics_; }

 private:
  struct Wiring;  // app.cc: how each module of the table (modules.h) is made
  friend struct Wiring;
  App() = default;
  void SweepLoop();
  // The first start on an empty store: the admin and its token (AuthOptions).
  absl::Status Bootstrap();
  absl::Status Ready();

  AppOptions options_;
  std::shared_ptr<prometheus::Registry> metrics_;
  // The open watch streams; outlives the gRPC server and its services.
  std::unique_ptr<WatchHub> watches_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<identity::IdentityStore> identities_;
  std::shared_ptr<audit::AuditLog> audit_;
  std::string bootstrap_token_;
  std::unique_ptr<registry::Registry> registry_;
  std::unique_ptr<registry::CenterDirectory> centers_;
  std::unique_ptr<catalog::Catalog> catalog_;
  // The catalog's registry client: stopped first on shutdown, so no registry holds it up.
  std::shared_ptr<oci::RegistryClient> registries_;
  std::unique_ptr<datamon::Datamon> datamon_;
  std::unique_ptr<southbound::AdapterClient> own_adapter_client_;
  southbound::AdapterClient* adapters_ = nullptr;  // the injected client or own_adapter_client_
  std::unique_ptr<monitor::Monitor> monitor_;
  std::unique_ptr<scheduler::InputsSource> scheduler_inputs_;
  // How long jobs run, learned (SPEC A16): taught by the job manager, asked by the scheduler;
  // declared first, so that it outlives both.
  std::unique_ptr<estimator::SharedEstimator> estimator_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<jobs::DataMover> data_mover_;
  std::unique_ptr<jobs::JobManager> jobs_;
  std::unique_ptr<accounting::UsageBook> usage_;
  std::unique_ptr<jobs::AdmissionReads> admission_reads_;  // declared after usage_: destroyed first
  std::unique_ptr<accounting::Settlements> settlements_;
  std::unique_ptr<accounting::Reconciler> reconciler_;
  std::unique_ptr<accounting::Utilisation> utilisation_;
  std::unique_ptr<endpoints::EndpointPasses> endpoint_passes_;
  std::unique_ptr<endpoints::EndpointProxy> endpoints_;  // declared after jobs_: stopped and destroyed first
  int endpoint_port_ = 0;
  std::vector<std::unique_ptr<grpc::Service>> grpc_services_;
  grpc::Service* job_service_ = nullptr;  // one of grpc_services_, when the jobs service runs here
  // Who may call what: the gRPC server's interceptor and the gateway's direct calls ask it.
  std::shared_ptr<const auth::CallAdmission> admission_;
  std::unique_ptr<grpc::Server> grpc_server_;
  // In-process channels: the services' own (calls carry the service secret) and the
  // gateway's (calls carry only what the REST caller sent).
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<grpc::Channel> gateway_channel_;
  // Remote services the gateway calls, by address, for readiness.
  std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> upstreams_;
  std::unique_ptr<AdminServer> admin_;  // without the gateway: /metrics, /healthz, /readyz
  std::unique_ptr<gateway::Gateway> gateway_;
  int grpc_port_ = 0;
  int rest_port_ = 0;
  int admin_port_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread sweeper_;
};

}  // namespace jc::server
