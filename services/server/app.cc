#include "services/server/app.h"

#include <fcntl.h>
#include <stdlib.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/gauge.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/grpc_metrics.h"
#include "common/grpc_reflection.h"
#include "common/grpc_server_threads.h"
#include "common/auth/api_token.h"
#include "common/auth/service_credentials.h"
#include "common/status_macros.h"
#include "services/catalog/catalog.h"
#include "services/catalog/catalog_service.h"
#include "services/datamon/datamon.h"
#include "services/datamon/datamon_service.h"
#include "services/datamon/source_selection.h"
#include "services/gateway/routes.h"
#include "services/identity/identity_service.h"
#include "services/jobs/job_access.h"
#include "common/timestamp.h"
#include "services/accounting/accounting_service.h"
#include "services/jobs/job_service.h"
#include "services/server/access_policy.h"
#include "services/server/admission_reads.h"
#include "services/server/modules.h"
#include "services/monitor/monitor_service.h"
#include "services/scheduler/grpc_inputs_source.h"
#include "services/scheduler/scheduler_service.h"
#include "services/registry/registry_service.h"
#include "services/registry/adapter_keys.h"

namespace jc::server {

const std::vector<std::string>& KnownServices() {
  static const auto* names = [] {
    auto* out = new std::vector<std::string>;
    for (const ModuleSpec& m : Modules()) out->push_back(m.name);
    return out;
  }();
  return *names;
}

absl::StatusOr<std::set<std::string>> ParseServices(const std::string& list) {
  std::set<std::string> out;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    std::string name(absl::StripAsciiWhitespace(item));
    if (name == "all") {
      out.insert(KnownServices().begin(), KnownServices().end());
      continue;
    }
    if (std::find(KnownServices().begin(), KnownServices().end(), name) == KnownServices().end()) {
      return absl::InvalidArgumentError(absl::StrCat("--services: unknown service \"", name,
                                                     "\"; known: all, ",
                                                     absl::StrJoin(KnownServices(), ", ")));
    }
    out.insert(name);
  }
  if (out.empty()) return absl::InvalidArgumentError("--services is empty; use all or a list");
  return out;
}

// How App::Start makes each module of the table (modules.h), with what they share.
struct App::Wiring {
  using ChannelSource = std::function<std::shared_ptr<grpc::Channel>()>;
  struct Env {
    std::function<bool(const std::string&)> has;  // runs in this process
    std::shared_ptr<const auth::TlsMaterial> tls;
    // A service another one calls: in process when it runs here, else at `address` (or
    // --upstream_address); `who` says, when neither, which service needed it and why.
    std::function<absl::StatusOr<ChannelSource>(const std::string& service, const std::string& address,
                                                const std::string& who)>
        upstream;
  };
  using Maker = absl::Status (*)(App&, Env&);
  static absl::Status MakeIdentity(App& app, Env& env);
  static absl::Status MakeRegistry(App& app, Env& env);
  static absl::Status MakeCatalog(App& app, Env& env);
  static absl::Status MakeDatamon(App& app, Env& env);
  static absl::Status MakeMonitor(App& app, Env& env);
  static absl::Status MakeScheduler(App& app, Env& env);
  static absl::Status MakeJobs(App& app, Env& env);
  static absl::Status MakeGateway(App& app, Env& env);
  static absl::Status ServeGrpc(App& app, Env& env);
  // Each row of Modules() and how it is made.
  static const std::map<std::string, Maker>& Makers() {
    static const auto* makers = new std::map<std::string, Maker>{
        {"identity", MakeIdentity}, {"registry", MakeRegistry},   {"catalog", MakeCatalog}, {"datamon", MakeDatamon},
        {"monitor", MakeMonitor},   {"scheduler", MakeScheduler}, {"jobs", MakeJobs},       {"gateway", MakeGateway}};
    return *makers;
  }
};

absl::StatusOr<std::unique_ptr<App>> App::Start(AppOptions options) {
  std::unique_ptr<App> app(new App());
  app->options_ = std::move(options);
  AppOptions& o = app->options_;
  JC_RETURN_IF_ERROR(CheckModules(o.services,
                                  {{"identity", o.identity_address},
                                   {"registry", o.registry_address},
                                   {"catalog", o.catalog_address},
                                   {"datamon", o.datamon_address},
                                   {"monitor", o.monitor_address},
                                   {"scheduler", o.scheduler_address},
                                   {"jobs", o.jobs_address}},
                                  o.upstream_address));
  app->metrics_ = std::make_shared<prometheus::Registry>();
  app->watches_ = std::make_unique<WatchHub>(o.watches, app->metrics_.get());
  Wiring::Env env;
  env.has = [&o](const std::string& name) { return o.services.count(name) > 0; };
  const bool serves_grpc = std::any_of(o.services.begin(), o.services.end(),
                                       [](const std::string& name) { return name != "gateway"; });
  if (o.auth.service_secret.empty()) {
    JC_ASSIGN_OR_RETURN(o.auth.service_secret, auth::RandomSecret(48));
  }
  if (o.auth.tls.enabled()) {
    JC_ASSIGN_OR_RETURN(env.tls, auth::LoadTls(o.auth.tls));
  }
  // A process that serves gRPC checks API tokens, which live in the store.
  if (serves_grpc) {
    if (o.store != nullptr) {
      app->store_ = std::move(o.store);
    } else {
      JC_ASSIGN_OR_RETURN(app->store_, store::OpenStore(o.store_uri, o.store_schema));
    }
    spdlog::info("store backend={} ready", std::string(app->store_->backend()));
    app->identities_ = std::make_unique<identity::IdentityStore>(app->store_.get(), o.clock, o.auth.identities);
    app->audit_ = std::make_shared<audit::AuditLog>(app->store_.get(), o.clock);
    if (o.auth.enabled && !o.auth.bootstrap_token_file.empty()) JC_RETURN_IF_ERROR(app->Bootstrap());
  }
  App* self = app.get();
  env.upstream = [self, &o, &env](const std::string& service, const std::string& address,
                                  const std::string& who) -> absl::StatusOr<Wiring::ChannelSource> {
    if (env.has(service)) return Wiring::ChannelSource([self] { return self->channel_; });
    std::string target = address.empty() ? o.upstream_address : address;
    if (target.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": run the ", service, " here (--services) or give --", service,
                                                     "_address or --upstream_address"));
    }
    // Over mutual TLS when this process has a certificate.
    auto channel = auth::ServiceChannel(target, auth::ChannelCredentials(env.tls.get()), o.auth.service_secret);
    return Wiring::ChannelSource([channel] { return channel; });
  };
  // What several modules share: the registry's centers (over gRPC, in process when it runs
  // here) and one southbound client for the monitor and the job manager.
  if (env.has("catalog") || env.has("datamon") || env.has("monitor") || env.has("jobs")) {
    JC_ASSIGN_OR_RETURN(auto registry,
                        env.upstream("registry", o.registry_address, "catalog, datamon, monitor and jobs need the registry"));
    app->centers_ = registry::MakeGrpcCenterDirectory(registry);
  }
  app->adapters_ = o.adapter_client;
  if (app->adapters_ == nullptr && (env.has("monitor") || env.has("jobs"))) {
    // With TLS, adapters are called over mutual TLS, their certificates checked against
    // their centers.
    // Each center's adapter proves it holds the key issued to the center (read from the
    // store at each proof: a rotation takes effect at once).
    southbound::AdapterProofOptions proof;
    if (app->store_ != nullptr) {
      proof.keys = [store = app->store_.get()](const std::string& center) {
        return registry::ReadAdapterKeys(*store, center);
      };
    }
    proof.require_keys = o.require_adapter_key;
    proof.metrics = app->metrics_.get();
    app->own_adapter_client_ = southbound::MakeGrpcAdapterClient(env.tls, std::move(proof));
    app->adapters_ = app->own_adapter_client_.get();
  }
  // The modules in table order; the gRPC server starts once every gRPC service is made,
  // before the gateway, which calls them through it.
  for (const ModuleSpec& module : Modules()) {
    if (module.name == "gateway") {
      if (serves_grpc) JC_RETURN_IF_ERROR(Wiring::ServeGrpc(*app, env));
    }
    if (!env.has(module.name)) continue;
    JC_RETURN_IF_ERROR(Wiring::Makers().at(module.name)(*app, env));
  }
  if (!env.has("gateway") && !o.admin_host.empty()) {
    // No REST routes here, only what every service must expose (SPEC C4).
    app->admin_ = std::make_unique<AdminServer>(app->metrics_, [self] { return self->Ready(); });
    JC_ASSIGN_OR_RETURN(app->admin_port_, app->admin_->Start(absl::StrCat(o.admin_host, ":", o.admin_port)));
    spdlog::info("metrics and health on http://{}:{}", o.admin_host, app->admin_port_);
  }

  if (app->registry_ != nullptr) app->sweeper_ = std::thread([self] { self->SweepLoop(); });
  // Started last: its first round may call the registry over the in-process channel.
  if (app->monitor_ != nullptr) app->monitor_->Start();
  if (app->scheduler_ != nullptr) {
    // One refresh before jobs are taken, so a create right after the start sees the catalog.
    if (absl::Status s = app->scheduler_->Refresh(); !s.ok()) spdlog::warn("scheduler: {}", s.ToString());
    app->scheduler_->Start();
  }
  if (app->jobs_ != nullptr) JC_RETURN_IF_ERROR(app->jobs_->Start());
  if (app->endpoints_ != nullptr) app->endpoints_->Start();
  return app;
}


absl::Status App::Wiring::MakeIdentity(App& app, Env& /*env*/) {
  app.grpc_services_.push_back(identity::MakeIdentityService(app.identities_.get(), app.audit_.get()));
  return absl::OkStatus();
}

absl::Status App::Wiring::MakeRegistry(App& app, Env& /*env*/) {
  AppOptions& o = app.options_;
  app.registry_ = std::make_unique<registry::Registry>(app.store_.get(), o.clock, o.registry);
  // Utilisation reads offered capacity from its history: centers from before it was kept.
  JC_RETURN_IF_ERROR(app.registry_->BackfillCapacityHistory());
  app.registry_->events().SetListener([hub = app.watches_.get()] { hub->Wake(); });
  app.grpc_services_.push_back(registry::MakeRegistryService(app.registry_.get(), app.watches_.get()));
  return absl::OkStatus();
}

absl::Status App::Wiring::MakeCatalog(App& app, Env& /*env*/) {
  AppOptions& o = app.options_;
  app.catalog_ = std::make_unique<catalog::Catalog>(app.store_.get(), o.clock, app.centers_.get());
  JC_ASSIGN_OR_RETURN(auto registries, oci::RegistryClient::Create(o.registries));
  app.registries_ = std::make_shared<oci::RegistryClient>(std::move(registries));
  app.catalog_->SetImageResolver(
      [registries = app.registries_](const oci::ImageReference& ref, const oci::Cancelled& cancelled) {
        return registries->Resolve(ref, cancelled);
      });
  app.grpc_services_.push_back(catalog::MakeCatalogService(app.catalog_.get()));
  return absl::OkStatus();
}

absl::Status App::Wiring::MakeDatamon(App& app, Env& /*env*/) {
  AppOptions& o = app.options_;
  auto weights = o.migration_weights.empty() ? datamon::DefaultWeights() : o.migration_weights;
  app.datamon_ = std::make_unique<datamon::Datamon>(app.store_.get(), o.clock,
                                                     app.centers_.get(), weights);
  app.grpc_services_.push_back(datamon::MakeDatamonService(app.datamon_.get()));
  return absl::OkStatus();
}

absl::Status App::Wiring::MakeMonitor(App& app, Env& /*env*/) {
  AppOptions& o = app.options_;
  app.monitor_ = std::make_unique<monitor::Monitor>(app.centers_.get(), app.adapters_, o.clock, o.monitor);
  if (app.catalog_ != nullptr) {
    // Spec x center offers say how many instances fit in what the center has free now.
    monitor::Monitor* monitor = app.monitor_.get();
    app.catalog_->SetFreeResources([monitor](const std::string& id) -> std::optional<jointcloud::v1::ComputingResources> {
      auto usage = monitor->Get(id);
      if (!usage.ok() || !usage->reachable() || !usage->has_observed_at()) return std::nullopt;
      return usage->free();
    });
  }
  app.monitor_->EnableMetrics(*app.metrics_);
  app.grpc_services_.push_back(monitor::MakeMonitorService(app.monitor_.get()));
  return absl::OkStatus();
}

absl::Status App::Wiring::MakeScheduler(App& app, Env& env) {
  AppOptions& o = app.options_;
  App* self = &app;
  // The scheduler reads the registry, catalog and datamon over gRPC: in process when
  // they run here, else where --<name>_address (or --upstream_address) says.
  std::map<std::string, scheduler::ChannelSource> sources;
  for (const auto& [name, address] : {std::pair<std::string, std::string>{"registry", o.registry_address},
                                      {"catalog", o.catalog_address}, {"datamon", o.datamon_address}}) {
    JC_ASSIGN_OR_RETURN(sources[name], env.upstream(name, address, absl::StrCat("the scheduler needs the ", name)));
  }
  app.scheduler_inputs_ = scheduler::MakeGrpcInputsSource(sources["registry"], sources["catalog"],
                                                           sources["datamon"], app.monitor_.get());
  scheduler::SchedulerOptions so;
  so.refresh_interval = o.scheduler_refresh;
  so.weight_profiles_file = o.weight_profiles_file;
  if (o.placement_history > 0) {
    so.placement_store = app.store_.get();
    so.journal.keep_jobs = o.placement_history;
  }
  app.scheduler_ = std::make_unique<scheduler::Scheduler>(app.scheduler_inputs_.get(), o.clock, so);
  // A profiles file that does not load stops the start: the deployment asked for it.
  JC_RETURN_IF_ERROR(app.scheduler_->LoadWeightProfiles());
  app.scheduler_->EnableMetrics(*app.metrics_);
  // A job's placement is shown to those who may see the job (the job manager, when here,
  // says; it is created below, before any call is served).
  app.grpc_services_.push_back(scheduler::MakeSchedulerService(
      app.scheduler_.get(), !env.has("jobs") ? scheduler::JobVisibility()
                                          : [self](const auth::Principal& caller, const std::string& job_id) {
                                              auto job = self->jobs_->Get(job_id);
                                              if (!job.ok()) return job.status();
                                              return jobs::CheckJobAccess(caller, *job, auth::ProjectRole::kViewer);
                                            }));
  return absl::OkStatus();
}

absl::Status App::Wiring::MakeJobs(App& app, Env& env) {
  AppOptions& o = app.options_;
  App* self = &app;
  if (app.scheduler_ == nullptr) {
    return absl::InvalidArgumentError("the jobs service places jobs with the scheduler: run both here (--services)");
  }
  // Staging asks datamon, and records staged images in the catalog.
  JC_ASSIGN_OR_RETURN(auto datamon, env.upstream("datamon", o.datamon_address, "the jobs service stages data through datamon"));
  JC_ASSIGN_OR_RETURN(auto catalog,
                      env.upstream("catalog", o.catalog_address, "the jobs service records staged images in the catalog"));
  app.data_mover_ = jobs::MakeGrpcDataMover(datamon, catalog);
  app.jobs_ = std::make_unique<jobs::JobManager>(app.store_.get(), app.scheduler_.get(), app.centers_.get(),
                                                  app.adapters_, app.data_mover_.get(), o.clock, o.jobs);
  app.jobs_->EnableMetrics(*app.metrics_);
  // The job manager learns run times from what ends; the scheduler places and plans with
  // them (in this process: the estimator is in memory).
  app.estimator_ = std::make_unique<estimator::SharedEstimator>(o.estimator);
  app.jobs_->SetDurationEstimator(app.estimator_.get());
  app.scheduler_->SetDurationEstimator(app.estimator_.get());
  app.jobs_->events().SetListener([hub = app.watches_.get()] { hub->Wake(); });
  if (!o.endpoint_host.empty()) {
    // Whoever a link was issued to is asked about again on every connection (endpoint_proxy.h).
    auto role_now = [ids = app.identities_.get()](const endpoints::EndpointPass& p) -> absl::StatusOr<auth::ProjectRole> {
      if (!p.token_id.empty()) {
        JC_ASSIGN_OR_RETURN(auth::Principal now, ids->PrincipalOfTokenId(p.token_id));
        if (now.name != p.user_name) return absl::UnauthenticatedError("the link's API token is another user's now");
        return now.RoleIn(p.project);
      }
      // An identity provider's caller: its roles came with its token and cannot be asked
      // again; its session lasts PassOptions::provider_session_ttl. Authentication off: as issued.
      return p.role;
    };
    app.endpoint_passes_ = std::make_unique<endpoints::EndpointPasses>(app.store_.get(), o.clock, o.endpoint_passes);
    app.endpoints_ = std::make_unique<endpoints::EndpointProxy>(o.endpoints, app.endpoint_passes_.get(), app.jobs_.get(),
                                                                std::move(role_now), app.metrics_.get());
    JC_ASSIGN_OR_RETURN(app.endpoint_port_, app.endpoints_->Bind(o.endpoint_host, o.endpoint_port));
    app.jobs_->SetEndpointActivity(app.endpoints_.get());  // interactive jobs' idle limits
    spdlog::info("endpoints on port {} as <job>-<task>-<replica>-<port>.{}", app.endpoint_port_, o.endpoints.domain);
  }
  app.grpc_services_.push_back(jobs::MakeJobService(app.jobs_.get(), app.watches_.get(), app.endpoints_.get()));
  app.job_service_ = app.grpc_services_.back().get();
  // The usage records the job manager writes are read where it runs.
  app.usage_ = std::make_unique<accounting::UsageBook>(app.store_.get());
  // Admission reads quotas and budgets from identity's projects, spend from the usage book.
  app.admission_reads_ = std::make_unique<ServiceAdmissionReads>(app.identities_.get(), app.usage_.get());
  app.jobs_->SetAdmissionReads(app.admission_reads_.get());
  app.settlements_ = std::make_unique<accounting::Settlements>(app.store_.get(), o.clock);
  app.utilisation_ = std::make_unique<accounting::Utilisation>(app.store_.get(), o.clock);
  // Reconciliation asks each center's adapter for the center's own accounting.
  app.reconciler_ = std::make_unique<accounting::Reconciler>(
      app.usage_.get(),
      [self](const std::string& center, absl::Time from, absl::Time to)
          -> absl::StatusOr<jointcloud::adapter::v1::ListAccountingResponse> {
        JC_ASSIGN_OR_RETURN(auto c, self->centers_->GetCenter(center));
        if (c.adapter_address().empty()) {
          return absl::FailedPreconditionError(absl::StrCat("center ", center, " has no adapter_address"));
        }
        jointcloud::adapter::v1::ListAccountingRequest req;
        *req.mutable_from() = ToTimestamp(from);
        *req.mutable_to() = ToTimestamp(to);
        return self->adapters_->ListAccounting({center, c.adapter_address()}, req);
      },
      [self] { return self->jobs_->origin(); });
  app.grpc_services_.push_back(
      accounting::MakeAccountingService(app.usage_.get(), app.settlements_.get(), app.reconciler_.get(),
                                        app.utilisation_.get()));
  return absl::OkStatus();
}

absl::Status App::Wiring::MakeGateway(App& app, Env& env) {
  AppOptions& o = app.options_;
  App* self = &app;
  // Each route group calls its service here when it runs here, else where the flags say.
  std::vector<gateway::Route> routes;
  std::vector<std::string> remote;
  std::shared_ptr<grpc::Channel> identity_channel;
  // The job service's unary methods are called directly when it runs here (ADR 0014).
  gateway::LocalService local_jobs;
  if (env.has("jobs") && o.gateway_direct_calls) local_jobs = {app.job_service_, app.admission_};
  auto train_jobs = [local_jobs](std::shared_ptr<grpc::Channel> channel) {
    return gateway::TrainJobRoutes(std::move(channel), local_jobs);
  };
  const std::tuple<const char*, const std::string*,
                   std::function<std::vector<gateway::Route>(std::shared_ptr<grpc::Channel>)>>
      groups[] = {{"identity", &o.identity_address, gateway::IdentityRoutes},
                  {"registry", &o.registry_address, gateway::RegistryRoutes},
                  {"catalog", &o.catalog_address, gateway::CatalogRoutes},
                  {"datamon", &o.datamon_address, gateway::DatamonRoutes},
                  {"monitor", &o.monitor_address, gateway::MonitorRoutes},
                  {"scheduler", &o.scheduler_address, gateway::SchedulerRoutes},
                  {"jobs", &o.jobs_address, train_jobs},
                  {"jobs", &o.jobs_address, gateway::AccountingRoutes}};
  for (const auto& [name, address, make] : groups) {
    std::shared_ptr<grpc::Channel> channel = app.gateway_channel_;
    if (!env.has(name)) {
      std::string target = address->empty() ? o.upstream_address : *address;
      if (target.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the gateway needs the ", name, " service: run it here (--services), or give --",
            name, "_address or --upstream_address"));
      }
      channel = grpc::CreateChannel(target, auth::ChannelCredentials(env.tls.get()));
      app.upstreams_.push_back({target, channel});
    }
    if (std::string(name) == "identity") {
      o.gateway.sees_tenants = gateway::AdminMetricsReader(channel);
      identity_channel = channel;
    }
    auto more = make(channel);
    routes.insert(routes.end(), std::make_move_iterator(more.begin()),
                  std::make_move_iterator(more.end()));
  }
  auto history = gateway::MetricsHistoryRoutes(o.prometheus_url, identity_channel);
  routes.insert(routes.end(), std::make_move_iterator(history.begin()), std::make_move_iterator(history.end()));
  if (env.tls != nullptr) {
    o.gateway.tls_cert_file = env.tls->files.cert;
    o.gateway.tls_key_file = env.tls->files.key;
  }
  app.gateway_ = std::make_unique<gateway::Gateway>(std::move(routes), o.gateway, app.metrics_,
                                                     [self] { return self->Ready(); });
  JC_ASSIGN_OR_RETURN(app.rest_port_, app.gateway_->Bind(o.rest_host, o.rest_port));
  app.gateway_->Start();
  app.admin_port_ = app.rest_port_;
  spdlog::info("rest listening on {}://{}:{}", env.tls != nullptr ? "https" : "http", o.rest_host, app.rest_port_);
  return absl::OkStatus();
}

absl::Status App::Wiring::ServeGrpc(App& app, Env& env) {
  AppOptions& o = app.options_;
  grpc::EnableDefaultHealthCheckService(true);
  EnableGrpcReflection();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.grpc_address, auth::ServerCredentials(env.tls.get()), &app.grpc_port_);
  for (auto& service : app.grpc_services_) builder.RegisterService(service.get());
  ConfigureServerThreads(builder, "jointcloud", 64);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  identity::AuthenticatorOptions ao;
  ao.enabled = o.auth.enabled;
  ao.service_secret = o.auth.service_secret;
  ao.oidc = o.auth.oidc;
  ao.claims = o.auth.claims;
  app.admission_ = std::make_shared<auth::CallAdmission>(
      std::make_shared<identity::IdentityAuthenticator>(app.identities_.get(), std::move(ao)), ControlPlaneAccess(),
      std::make_shared<auth::RateLimiter>(o.auth.rate_limit, o.clock), app.audit_, env.tls != nullptr);
  interceptors.push_back(auth::MakeAuthInterceptor(app.admission_));
  interceptors.push_back(MakeGrpcMetricsInterceptor(app.metrics_));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  app.grpc_server_ = builder.BuildAndStart();
  if (app.grpc_server_ == nullptr || app.grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", o.grpc_address,
                                               env.tls != nullptr ? " (in use, not a local address, or the TLS "
                                                                "certificate and key do not make a pair)"
                                                              : " (in use, or not a local address)"));
  }
  auth::ClientInterceptors as_service;
  as_service.push_back(auth::MakeBearerInterceptor(o.auth.service_secret));
  app.channel_ = app.grpc_server_->experimental().InProcessChannelWithInterceptors(grpc::ChannelArguments(),
                                                                                    std::move(as_service));
  app.gateway_channel_ = app.grpc_server_->InProcessChannel(grpc::ChannelArguments());
  spdlog::info("grpc listening on port {} services={}", app.grpc_port_,
               absl::StrJoin(o.services, ","));
  return absl::OkStatus();
}

absl::Status App::Bootstrap() {
  // The token is written to a temporary file first, so a store that bootstraps always
  // leaves a token someone can read. The file is this process's own: processes that
  // start together on one empty store may share the token's path (a compose volume), and
  // the one that loses the race to create the admin removes only its own file.
  const std::string& path = options_.auth.bootstrap_token_file;
  std::string temp = path + ".new-XXXXXX";
  int fd = ::mkstemp(temp.data());  // mode 0600
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write the admin token file ", temp, ": ", std::strerror(errno)));
  }
  auto token = identities_->BootstrapAdmin("admin");
  bool written = false;
  if (token.ok() && token->has_value()) {
    std::string line = **token + "\n";
    written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  }
  ::close(fd);
  if (!token.ok() || !token->has_value()) {
    ::unlink(temp.c_str());
    if (!token.ok()) return token.status();
    return absl::OkStatus();  // users exist: an admin hands out tokens
  }
  if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("the admin token could not be written to ", path, ": ",
                                            std::strerror(errno), "; it is ", **token));
  }
  bootstrap_token_ = **token;
  spdlog::warn(
      "first start: created the federation admin \"admin\"; its API token is in {} (shown once, keep it safe). "
      "Use it as: curl -H \"Authorization: Bearer $(cat {})\" ...",
      path, path);
  return absl::OkStatus();
}

absl::Status App::Ready() {
  if (store_ != nullptr) JC_RETURN_IF_ERROR(store_->Ping());
  // A job manager that does not lead takes no creates: say so, and why.
  if (jobs_ != nullptr) JC_RETURN_IF_ERROR(jobs_->Ready());
  for (const auto& [target, channel] : upstreams_) {
    auto state = channel->GetState(/*try_to_connect=*/true);
    if (state != GRPC_CHANNEL_READY &&
        !channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::milliseconds(200))) {
      return absl::UnavailableError(absl::StrCat("upstream ", target, " is not reachable"));
    }
  }
  return absl::OkStatus();
}

namespace {

// jc_center_* gauges of this month's utilisation (services/accounting/utilisation.h): a
// center's series go when it has neither capacity nor use this month.
class UtilisationGauges {
 public:
  explicit UtilisationGauges(prometheus::Registry& registry)
      : ratio_(prometheus::BuildGauge()
                   .Name("jc_center_utilisation_ratio")
                   .Help("This month so far: what a center's replicas were allocated over the capacity it offered, "
                         "by center and resource (cpu, gpu)")
                   .Register(registry)),
        offered_(prometheus::BuildGauge()
                     .Name("jc_center_offered_hours")
                     .Help("This month so far: capacity-hours a center offered (its registered capacity x hours), "
                           "by center and resource")
                     .Register(registry)),
        used_(prometheus::BuildGauge()
                  .Name("jc_center_used_hours")
                  .Help("This month: capacity-hours allocated to a center's replicas that ended, by center and resource")
                  .Register(registry)),
        revenue_(prometheus::BuildGauge()
                     .Name("jc_center_revenue")
                     .Help("This month: what a center's usage records cost (the catalog's price unit), by center")
                     .Register(registry)) {}

  void Set(const std::vector<jointcloud::v1::CenterUtilisation>& rows) {
    std::set<std::string> now;
    for (const auto& c : rows) {
      now.insert(c.ai_center_id());
      for (const auto& r : c.resources()) {
        const prometheus::Labels labels{{"center", c.ai_center_id()}, {"resource", r.resource()}};
        ratio_.Add(labels).Set(r.ratio());
        offered_.Add(labels).Set(r.offered_hours());
        used_.Add(labels).Set(r.used_hours());
      }
      revenue_.Add({{"center", c.ai_center_id()}}).Set(c.revenue());
    }
    for (const std::string& gone : shown_) {
      if (now.count(gone)) continue;
      for (const char* resource : {"cpu", "gpu"}) {
        const prometheus::Labels labels{{"center", gone}, {"resource", resource}};
        for (auto* family : {&ratio_, &offered_, &used_}) {
          if (family->Has(labels)) family->Remove(&family->Add(labels));
        }
      }
      if (revenue_.Has({{"center", gone}})) revenue_.Remove(&revenue_.Add({{"center", gone}}));
    }
    shown_ = std::move(now);
  }

 private:
  prometheus::Family<prometheus::Gauge>& ratio_;
  prometheus::Family<prometheus::Gauge>& offered_;
  prometheus::Family<prometheus::Gauge>& used_;
  prometheus::Family<prometheus::Gauge>& revenue_;
  std::set<std::string> shown_;
};

}  // namespace

void App::SweepLoop() {
  auto& family = prometheus::BuildGauge()
                     .Name("jc_centers")
                     .Help("Registered centers by status (Table 1)")
                     .Register(*metrics_);
  prometheus::Gauge* by_status[3] = {&family.Add({{"status", "unavailable"}}),
                                     &family.Add({{"status", "available"}}),
                                     &family.Add({{"status", "unknown"}})};
  UtilisationGauges utilisation(*metrics_);
  absl::Time utilisation_at = absl::InfinitePast();
  int utilisation_centers = -1;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    auto swept = registry_->SweepHealth();
    if (!swept.ok()) spdlog::warn("health sweep failed: {}", swept.status().ToString());
    auto counts = registry_->CountByStatus();
    if (counts.ok()) {
      for (int s = 0; s < 3; ++s) by_status[s]->Set((*counts)[s]);
    }
    // This month's utilisation per center, for Prometheus: a few queries, once a minute, and
    // at once when centers come or go (a new center's series from its registration on).
    const int centers = counts.ok() ? (*counts)[0] + (*counts)[1] + (*counts)[2] : -1;
    if (utilisation_ != nullptr && (absl::Now() - utilisation_at >= absl::Minutes(1) || centers != utilisation_centers)) {
      utilisation_at = absl::Now();
      utilisation_centers = centers;
      const std::string month = absl::FormatCivilTime(absl::ToCivilMonth(options_.clock->Now(), absl::UTCTimeZone()));
      auto rows = utilisation_->Month(month);
      if (rows.ok()) {
        utilisation.Set(*rows);
      } else {
        spdlog::warn("utilisation for the metrics failed: {}", rows.status().ToString());
      }
    }
    lock.lock();
    cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.health_sweep_interval),
                 [&] { return stopping_; });
  }
}

void App::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  // Registrations waiting on registries end first: the gateway's stop waits for its calls.
  if (registries_ != nullptr) registries_->StopAll();
  if (gateway_ != nullptr) gateway_->Stop();
  if (endpoints_ != nullptr) endpoints_->Stop();
  if (admin_ != nullptr) admin_->Stop();
  if (monitor_ != nullptr) monitor_->Stop();
  if (jobs_ != nullptr) jobs_->Stop();
  if (scheduler_ != nullptr) scheduler_->Stop();
  if (registry_ != nullptr) registry_->events().Close();
  if (grpc_server_ != nullptr) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  // After the server: its cancelled watches were finished by the hub.
  if (watches_ != nullptr) watches_->Stop();
  if (sweeper_.joinable()) sweeper_.join();
}

App::~App() { Shutdown(); }

}  // namespace jc::server
