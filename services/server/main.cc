// The `jointcloud` server: parses flags, builds the configuration, wires the services it
// is asked to run (App), and serves until SIGINT or SIGTERM.

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "common/auth/service_credentials.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/version.h"
#include "services/datamon/source_selection.h"
#include "services/server/app.h"

ABSL_FLAG(std::string, services, "all",
          "services to run: all, or a comma list of identity, registry, catalog, datamon, monitor, scheduler, jobs, "
          "gateway");
ABSL_FLAG(std::string, grpc_address, "127.0.0.1:50051", "gRPC listen address (host:port)");
ABSL_FLAG(std::string, rest_address, "127.0.0.1:8080", "REST listen address (host:port)");
ABSL_FLAG(std::string, endpoint_address, "",
          "where the endpoint listener serves replicas' named ports to browsers (host:port, with the jobs service; "
          "SPEC A17); empty: no endpoints");
ABSL_FLAG(std::string, endpoint_domain, "endpoints.localhost",
          "endpoints are the hosts <job>-<task>-<replica>-<port>.<this domain>: a wildcard DNS name for the listener "
          "(browsers resolve *.localhost to this machine)");
ABSL_FLAG(std::string, endpoint_scheme, "http",
          "how browsers reach the endpoint listener: https behind a TLS proxy with a wildcard certificate, else http");
ABSL_FLAG(int, endpoint_public_port, 0, "the port in endpoint links (a proxy's in front); 0: the port bound");
ABSL_FLAG(int, endpoint_max_connections, 512, "endpoint connections open at once (each holds two threads)");
ABSL_FLAG(int, endpoint_max_per_caller, 32, "endpoint connections one user may hold open at once");
ABSL_FLAG(absl::Duration, endpoint_activity_interval, absl::Seconds(30),
          "how often the endpoint listener asks the replicas of interactive jobs with an idleTimeout for their own "
          "use (their ports' activityPath)");
ABSL_FLAG(int, endpoint_max_pending_heads, 4096,
          "endpoint connections that may wait for their request head at once (no thread each); past it the oldest "
          "is dropped");
ABSL_FLAG(absl::Duration, endpoint_session_ttl, absl::Hours(12),
          "how long an opened endpoint stays open in a browser without a new link");
ABSL_FLAG(std::string, admin_address, "127.0.0.1:9090",
          "where a process without the gateway serves /metrics, /healthz and /readyz");
ABSL_FLAG(std::string, data_dir, "./data", "directory of the embedded store");
ABSL_FLAG(std::string, store, "",
          "store URI: postgresql://user@host:port/db, or sqlite:///path (default: the embedded "
          "store in --data_dir)");
ABSL_FLAG(std::string, store_schema, "",
          "PostgreSQL schema for Jointcloud's tables, created if missing (default: public)");
ABSL_FLAG(std::string, registry_address, "",
          "host:port of the registry when this process does not run it");
ABSL_FLAG(std::string, catalog_address, "",
          "host:port of the catalog when this process runs the gateway or scheduler but not the catalog");
ABSL_FLAG(std::string, datamon_address, "",
          "host:port of datamon when this process runs the gateway or scheduler but not datamon");
ABSL_FLAG(std::string, monitor_address, "",
          "host:port of the monitor when this process runs the gateway but not the monitor");
ABSL_FLAG(std::string, scheduler_address, "",
          "host:port of the scheduler when this process runs the gateway but not the scheduler");
ABSL_FLAG(std::string, jobs_address, "",
          "host:port of the jobs service when this process runs the gateway but not the jobs service");
ABSL_FLAG(absl::Duration, scheduler_refresh, absl::Seconds(1),
          "how often the scheduler rebuilds its view of the centers from the registry, catalog, "
          "datamon and monitor");
ABSL_FLAG(int32_t, placement_history, 100000,
          "placement explanations kept in the store, the newest jobs' (jcctl job explain after a restart, or "
          "asked of another instance); 0: only the last 10,000 in memory");
ABSL_FLAG(absl::Duration, monitor_interval, absl::Seconds(5),
          "how often the monitor polls every center's adapter for its usage (Table 4)");
ABSL_FLAG(absl::Duration, adapter_timeout, absl::Seconds(2),
          "deadline of one call to an adapter; a center whose adapter misses it is not reported alive");
ABSL_FLAG(std::string, upstream_address, "",
          "host:port of a jointcloud gRPC server for every service not run here and not named "
          "by its own --*_address flag");
ABSL_FLAG(absl::Duration, center_unknown_after, absl::Seconds(30),
          "a center silent this long becomes unknown (2)");
ABSL_FLAG(absl::Duration, center_unavailable_after, absl::Seconds(90),
          "a center silent this long becomes unavailable (0)");
ABSL_FLAG(std::string, queue_order, jc::scheduler::kDefaultQueueOrder,
          "which waiting job is placed first, within a priority: fcfs (submission order), sef (shortest "
          "expected run time first, learned from the jobs that ended, aged so long jobs are not starved), hrrn "
          "(highest response ratio next: (wait + expected run time) / expected run time, the default), las "
          "(least attained service first, Tiresias), each alone or after fair_share (the project holding the "
          "smallest dominant share of the federation's GPUs, CPUs and memory): fcfs, fair_share, sef, "
          "fair_share+sef, hrrn, fair_share+hrrn, las, fair_share+las");
ABSL_FLAG(double, queue_aging, jc::scheduler::kDefaultQueueAging,
          "sef: seconds of a waiting job's expected length forgiven per second it waits (a long job waits at most "
          "about its length / aging behind short ones); in (0, 100]");
ABSL_FLAG(absl::Duration, queue_max_wait, absl::Hours(24),
          "a job that has waited this long goes ahead of every job that has not, whatever the queue order says "
          "(nothing starves)");
ABSL_FLAG(int, max_moves, 2,
          "how many times one replica may be taken back from a center where it waits and placed again (0: "
          "replicas never move)");
ABSL_FLAG(absl::Duration, move_after, absl::Minutes(2),
          "a replica placed where it was expected to start at once that still waits at its center this long is "
          "weighed for a move");
ABSL_FLAG(double, move_margin, 0.25,
          "a replica moves only to a center expected to finish it sooner by more than this fraction");
ABSL_FLAG(std::string, weight_profiles, "",
          "a YAML file of weight profiles on top of the built-in ones (docs/scheduling.md); reread when it "
          "changes (jc-sim tune writes one)");
ABSL_FLAG(std::string, migration_weights, "",
          "weights of the data migration evaluators, e.g. least_load=2,topology_affinity=1");
ABSL_FLAG(int, rest_threads, 8, "REST threads kept ready for connections");
ABSL_FLAG(int, rest_max_threads, 2048,
          "most REST threads: one per open connection (idle keep-alive ones included), so idle or slow "
          "connections do not keep real clients waiting");
ABSL_FLAG(int, max_watches_per_caller, 32,
          "watch streams one user may hold open at once (WatchTrainJobs, WatchCenters, the REST event streams); "
          "past it that user's next watch is refused with 429 / RESOURCE_EXHAUSTED. 0: no limit");
ABSL_FLAG(std::string, registry_ca_file, "",
          "PEM file of CAs trusted for image registries besides the system's (a registered image's reference is "
          "resolved to its digest by asking its registry)");
ABSL_FLAG(std::string, registry_auth_file, "",
          "credentials for image registries, in Docker's config.json form: {\"auths\": {\"host:port\": {\"auth\": "
          "base64(user:password)}}}");
ABSL_FLAG(absl::Duration, registry_timeout, absl::Seconds(10),
          "how long one image registration may wait on its registry, in all (its token, manifests and config, "
          "however slowly the registry answers); past it the registration is refused with 503");
ABSL_FLAG(int64_t, registry_max_manifest_bytes, 4 << 20,
          "the most read of any one answer of a registry (a manifest, an index, an image config, a token); past it "
          "the registration is refused and the connection closed");
ABSL_FLAG(int, registry_max_concurrent, 8,
          "image registrations that may ask registries at once; one more is refused at once with 429, so slow "
          "registries never hold more than this many request threads");
ABSL_FLAG(bool, require_adapter_key, false,
          "refuse every center that was issued no adapter key (POST /openapi/v1/centers/{id}/adapterkey): without "
          "one, a center's adapter is known by the id it reports alone. Turn on once every center's adapter runs "
          "with --center_key_file");
ABSL_FLAG(bool, gateway_direct_calls, true,
          "the REST gateway calls the job service's unary methods (create, get, list, stop...) directly when both "
          "run in this process, through the same authentication, access rules, rate limits and audit as gRPC "
          "(ADR 0014); false: over the in-process gRPC channel like every other service");
ABSL_FLAG(absl::Duration, adapter_key_grace, absl::Hours(1),
          "how long a center's previous adapter key still proves it after a new one is issued");
ABSL_FLAG(std::string, instance_id, "",
          "this instance's name in the jobs lease (instances sharing a store take turns: one dispatches, the "
          "others stand by); default: the host name. Two instances on one host need different ids");
ABSL_FLAG(int64_t, job_event_retention, 100000,
          "How many of the newest job events the store keeps for watchers (WatchTrainJobs, the REST event "
          "streams); a watcher resuming from an older event is told to re-read the job");
ABSL_FLAG(bool, metering, true,
          "write a usage record for each replica attempt that ran, priced at the price in force when it started "
          "(accounting, budgets and settlement read them); false: a federation that bills nothing");
ABSL_FLAG(std::string, prometheus_url, "",
          "Prometheus's base URL (http://127.0.0.1:9091): the console's charts read the job and scheduling rates "
          "from it, so they start full and survive restarts; empty: the console samples /metrics itself");
ABSL_FLAG(absl::Duration, unsatisfiable_grace, absl::Minutes(10),
          "how long a waiting job that no registered center could run any more (a center left) waits for "
          "one that can before it fails with the reason");
ABSL_FLAG(absl::Duration, center_lost_grace, absl::Minutes(5),
          "how long a center may be lost (gone from the registry or unavailable there, its adapter unreachable) "
          "before the service and interactive replicas it held are given up: services start again elsewhere, "
          "interactive jobs fail saying so; the old replicas are stopped once the center answers again");
ABSL_FLAG(absl::Duration, usage_report_grace, absl::Hours(24),
          "how long an attempt the control plane stopped waits for its center to report its end (and usage); "
          "after it the control plane's own times stand in (a usage record of source control_plane), and a "
          "report that comes later writes a correction");
ABSL_FLAG(absl::Duration, jobs_lease_ttl, absl::Seconds(10),
          "how long the jobs lease outlives a leader that stopped renewing it (a standby takes over after it)");
ABSL_FLAG(std::string, identity_address, "",
          "host:port of the identity service when this process runs the gateway but not the identity service");
ABSL_FLAG(bool, insecure_no_auth, false,
          "turn authentication off: every caller is an anonymous federation admin. For a laptop only: the REST "
          "and gRPC addresses must then be loopback ones");
ABSL_FLAG(std::string, admin_token_file, "",
          "where the first start on an empty store writes the federation admin's API token (default: "
          "<data_dir>/admin.token)");
ABSL_FLAG(std::string, service_token_file, "",
          "a file holding the secret Jointcloud's processes present to each other (at least 32 characters, e.g. "
          "`openssl rand -base64 48`); every process of a split deployment needs the same one. Default: a random "
          "secret of this process, enough when it runs every service");
ABSL_FLAG(std::string, oidc_issuer, "", "accept OIDC bearer tokens (JWT, RS256 or ES256) whose iss is this");
ABSL_FLAG(std::string, oidc_audience, "", "the aud OIDC tokens must carry (with --oidc_issuer)");
ABSL_FLAG(std::string, oidc_jwks_file, "", "the issuer's signing keys as a JWKS file (with --oidc_issuer)");
ABSL_FLAG(std::string, oidc_user_claim, "sub", "the OIDC claim that names the user");
ABSL_FLAG(std::string, oidc_projects_claim, "projects",
          "the OIDC claim listing the user's projects: [\"proj:member\", ...] or {\"proj\": \"viewer\"}");
ABSL_FLAG(std::string, oidc_roles_claim, "roles", "the OIDC claim listing the user's roles");
ABSL_FLAG(std::string, oidc_admin_role, "jointcloud-admin",
          "the role (in --oidc_roles_claim) that makes a federation admin");
ABSL_FLAG(double, rate_limit, 200,
          "requests per second each user may make (federation admins and Jointcloud's services are not limited); "
          "more get 429 with Retry-After. 0: no limit");
ABSL_FLAG(double, rate_limit_burst, 400, "how many requests above --rate_limit a user may make at once");
ABSL_FLAG(absl::Duration, auth_cache_ttl, absl::Seconds(5),
          "how long a token's verdict is reused before the store is asked again (a revocation takes effect in "
          "other processes within it)");
ABSL_FLAG(absl::Duration, auth_stale_ttl, absl::Minutes(10),
          "while the store cannot be asked, how long a caller's last verdict still stands");
ABSL_FLAG(std::string, tls_cert, "",
          "this process's PEM certificate: REST is served over HTTPS and gRPC over TLS, and calls to other Jointcloud "
          "processes present it (mutual TLS). scripts/dev-ca.sh makes development ones");
ABSL_FLAG(std::string, tls_key, "", "the private key of --tls_cert (PEM)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificates that sign the peers' certificates (client certificates are verified when "
          "presented; servers this process calls must present one it signed)");
ABSL_FLAG(bool, plaintext, false,
          "serve REST and gRPC without TLS on addresses other than loopback (without it, a non-loopback address "
          "needs --tls_cert, --tls_key and --tls_ca)");

namespace {

int Fail(const std::string& message) {
  spdlog::error("{}", message);
  return 1;
}

// "host:port" with the port split at the last colon.
bool ParseHostPort(const std::string& text, std::string* host, int* port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = text.substr(0, colon);
  return absl::SimpleAtoi(text.substr(colon + 1), port) && *port >= 0 && *port <= 65535;
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]" ||
         absl::StartsWith(host, "127.");
}

// Authentication settings from the flags (docs/security.md).
absl::Status ConfigureAuth(jc::server::AppOptions* options) {
  jc::server::AuthOptions& auth = options->auth;
  std::string grpc_host = options->grpc_address.substr(0, options->grpc_address.rfind(':'));
  auth.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)};
  if (!auth.tls.enabled() && !absl::GetFlag(FLAGS_plaintext) &&
      (!IsLoopback(options->rest_host) || !IsLoopback(grpc_host))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "serving on ", options->rest_host, " and ", grpc_host,
        " would send tokens in plaintext: give --tls_cert, --tls_key and --tls_ca, or --plaintext to accept that "
        "(behind a TLS-terminating proxy, say)"));
  }
  if (absl::GetFlag(FLAGS_insecure_no_auth)) {
    if (!IsLoopback(options->rest_host) || !IsLoopback(grpc_host) ||
        (!options->admin_host.empty() && !IsLoopback(options->admin_host))) {
      return absl::InvalidArgumentError(
          "--insecure_no_auth serves loopback addresses only (127.0.0.1, ::1): anyone who reaches the API would be "
          "a federation admin");
    }
    auth.enabled = false;
    spdlog::warn("AUTHENTICATION IS OFF (--insecure_no_auth): every caller is a federation admin");
    return absl::OkStatus();
  }
  if (std::string file = absl::GetFlag(FLAGS_service_token_file); !file.empty()) {
    auto secret = jc::auth::ReadServiceSecret(file);
    if (!secret.ok()) return secret.status();
    auth.service_secret = *secret;
  }
  auth.identities.cache_ttl = absl::GetFlag(FLAGS_auth_cache_ttl);
  auth.identities.stale_ttl = absl::GetFlag(FLAGS_auth_stale_ttl);
  auth.rate_limit.per_second = absl::GetFlag(FLAGS_rate_limit);
  auth.rate_limit.burst = absl::GetFlag(FLAGS_rate_limit_burst);
  if (auth.rate_limit.per_second < 0 || (auth.rate_limit.per_second > 0 && auth.rate_limit.burst < 1)) {
    return absl::InvalidArgumentError("--rate_limit must not be negative, and --rate_limit_burst at least 1");
  }
  auth.bootstrap_token_file = absl::GetFlag(FLAGS_admin_token_file);
  if (auth.bootstrap_token_file.empty()) {
    auth.bootstrap_token_file = (std::filesystem::path(absl::GetFlag(FLAGS_data_dir)) / "admin.token").string();
    std::error_code ec;
    std::filesystem::create_directories(absl::GetFlag(FLAGS_data_dir), ec);
  }
  std::string issuer = absl::GetFlag(FLAGS_oidc_issuer);
  if (!issuer.empty()) {
    jc::auth::JwtOptions jwt;
    jwt.issuer = issuer;
    jwt.audience = absl::GetFlag(FLAGS_oidc_audience);
    std::string jwks = absl::GetFlag(FLAGS_oidc_jwks_file);
    if (jwt.audience.empty() || jwks.empty()) {
      return absl::InvalidArgumentError("--oidc_issuer needs --oidc_audience and --oidc_jwks_file");
    }
    auto verifier = jc::auth::JwtVerifier::FromJwksFile(jwks, jwt, jc::RealClock::Get());
    if (!verifier.ok()) return verifier.status();
    auth.oidc = std::move(verifier).value();
    auth.claims.user = absl::GetFlag(FLAGS_oidc_user_claim);
    auth.claims.projects = absl::GetFlag(FLAGS_oidc_projects_claim);
    auth.claims.roles = absl::GetFlag(FLAGS_oidc_roles_claim);
    auth.claims.admin_role = absl::GetFlag(FLAGS_oidc_admin_role);
    spdlog::info("oidc: accepting tokens of {} for audience {}", issuer, jwt.audience);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  jc::daemon::Begin("jointcloud",
                    "Jointcloud control plane.\n"
                    "  jointcloud                         every service, embedded store in ./data\n"
                    "  jointcloud --store=postgresql://...  the same on PostgreSQL\n"
                    "  jointcloud --services=gateway --upstream_address=host:50051\n"
                    "Flags may also come from a file: --flagfile=jointcloud.flags",
                    argc, argv);

  jc::server::AppOptions options;
  auto services = jc::server::ParseServices(absl::GetFlag(FLAGS_services));
  if (!services.ok()) return Fail(std::string(services.status().message()));
  options.services = *services;
  options.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  if (!ParseHostPort(absl::GetFlag(FLAGS_rest_address), &options.rest_host, &options.rest_port)) {
    return Fail(absl::StrCat("--rest_address \"", absl::GetFlag(FLAGS_rest_address),
                             "\" is not host:port"));
  }
  if (std::string endpoint = absl::GetFlag(FLAGS_endpoint_address); !endpoint.empty()) {
    if (!ParseHostPort(endpoint, &options.endpoint_host, &options.endpoint_port)) {
      return Fail(absl::StrCat("--endpoint_address \"", endpoint, "\" is not host:port"));
    }
    options.endpoints.domain = absl::GetFlag(FLAGS_endpoint_domain);
    options.endpoints.scheme = absl::GetFlag(FLAGS_endpoint_scheme);
    options.endpoints.public_port = absl::GetFlag(FLAGS_endpoint_public_port);
    options.endpoints.max_connections = absl::GetFlag(FLAGS_endpoint_max_connections);
    options.endpoints.max_per_caller = absl::GetFlag(FLAGS_endpoint_max_per_caller);
    options.endpoints.max_pending_heads = absl::GetFlag(FLAGS_endpoint_max_pending_heads);
    options.endpoints.activity_interval = absl::GetFlag(FLAGS_endpoint_activity_interval);
    options.endpoint_passes.session_ttl = absl::GetFlag(FLAGS_endpoint_session_ttl);
    if (options.endpoints.scheme != "http" && options.endpoints.scheme != "https") {
      return Fail("--endpoint_scheme is http or https");
    }
    if (options.endpoints.domain.empty() || options.endpoints.domain.find_first_of(":/ ") != std::string::npos) {
      return Fail("--endpoint_domain is a DNS name (endpoints.example.com)");
    }
    if (options.endpoints.max_connections < 1 || options.endpoints.max_per_caller < 1 ||
        options.endpoints.max_pending_heads < 1 || options.endpoint_passes.session_ttl <= absl::ZeroDuration() ||
        options.endpoints.activity_interval <= absl::ZeroDuration()) {
      return Fail("--endpoint_max_connections, --endpoint_max_per_caller, --endpoint_max_pending_heads, "
                  "--endpoint_session_ttl and --endpoint_activity_interval are positive");
    }
    if (options.endpoints.scheme == "http" && !IsLoopback(options.endpoint_host) && !absl::GetFlag(FLAGS_plaintext)) {
      return Fail(absl::StrCat("serving endpoints on ", options.endpoint_host,
                               " over http would send their sessions in plaintext: put a TLS proxy with a wildcard "
                               "certificate in front and give --endpoint_scheme=https, or --plaintext to accept that"));
    }
  }
  if (!ParseHostPort(absl::GetFlag(FLAGS_admin_address), &options.admin_host,
                     &options.admin_port)) {
    return Fail(absl::StrCat("--admin_address \"", absl::GetFlag(FLAGS_admin_address),
                             "\" is not host:port"));
  }
  options.store_uri = absl::GetFlag(FLAGS_store);
  options.store_schema = absl::GetFlag(FLAGS_store_schema);
  if (options.store_uri.empty()) {
    std::error_code ec;
    std::filesystem::path dir = absl::GetFlag(FLAGS_data_dir);
    std::filesystem::create_directories(dir, ec);
    if (ec) return Fail(absl::StrCat("cannot create --data_dir ", dir.string(), ": ", ec.message()));
    options.store_uri = "sqlite://" + std::filesystem::absolute(dir / "jointcloud.db").string();
  }
  options.registry_address = absl::GetFlag(FLAGS_registry_address);
  options.catalog_address = absl::GetFlag(FLAGS_catalog_address);
  options.datamon_address = absl::GetFlag(FLAGS_datamon_address);
  options.monitor_address = absl::GetFlag(FLAGS_monitor_address);
  options.scheduler_address = absl::GetFlag(FLAGS_scheduler_address);
  options.jobs_address = absl::GetFlag(FLAGS_jobs_address);
  options.identity_address = absl::GetFlag(FLAGS_identity_address);
  options.scheduler_refresh = absl::GetFlag(FLAGS_scheduler_refresh);
  options.placement_history = absl::GetFlag(FLAGS_placement_history);
  options.weight_profiles_file = absl::GetFlag(FLAGS_weight_profiles);
  auto queue = jc::scheduler::ParseQueueSettings(absl::GetFlag(FLAGS_queue_order));
  if (!queue.ok()) return Fail(absl::StrCat("--queue_order: ", queue.status().message()));
  if (absl::GetFlag(FLAGS_queue_max_wait) <= absl::ZeroDuration()) {
    return Fail("--queue_max_wait: must be positive (e.g. 24h)");
  }
  queue->max_wait_s = absl::ToDoubleSeconds(absl::GetFlag(FLAGS_queue_max_wait));
  const double aging = absl::GetFlag(FLAGS_queue_aging);
  if (!(aging > 0 && aging <= 100)) return Fail("--queue_aging: must be in (0, 100] (e.g. 1 or 0.25)");
  queue->aging = aging;
  options.jobs.queue = *queue;
  // Which order waiting jobs are offered places in is a choice an operator must be able to
  // see (docs/scheduling.md): said once at start.
  spdlog::info("queue order: {}{}, max wait {}", queue->Name(),
               queue->order == "sef" ? absl::StrCat(" (aging ", queue->aging, ")") : std::string(),
               absl::FormatDuration(absl::GetFlag(FLAGS_queue_max_wait)));
  options.jobs.max_moves = absl::GetFlag(FLAGS_max_moves);
  options.jobs.move_after = absl::GetFlag(FLAGS_move_after);
  options.jobs.move_margin = absl::GetFlag(FLAGS_move_margin);
  if (options.jobs.max_moves < 0 || options.jobs.max_moves > 100) {
    return Fail("--max_moves: must be between 0 (never) and 100");
  }
  if (options.jobs.move_after <= absl::ZeroDuration()) return Fail("--move_after: must be positive (e.g. 2m)");
  if (!(options.jobs.move_margin >= 0 && options.jobs.move_margin < 1)) {
    return Fail("--move_margin: must be a fraction in [0, 1) (e.g. 0.25)");
  }
  if (options.scheduler_refresh <= absl::ZeroDuration()) return Fail("--scheduler_refresh must be positive");
  if (options.placement_history < 0) return Fail("--placement_history must not be negative (0: memory only)");
  options.upstream_address = absl::GetFlag(FLAGS_upstream_address);
  options.monitor.interval = absl::GetFlag(FLAGS_monitor_interval);
  options.monitor.call_timeout = absl::GetFlag(FLAGS_adapter_timeout);
  options.jobs.instance_id = absl::GetFlag(FLAGS_instance_id);
  options.jobs.lease_ttl = absl::GetFlag(FLAGS_jobs_lease_ttl);
  options.jobs.events.retention = absl::GetFlag(FLAGS_job_event_retention);
  options.jobs.metering = absl::GetFlag(FLAGS_metering);
  options.jobs.usage_report_grace = absl::GetFlag(FLAGS_usage_report_grace);
  options.jobs.unsatisfiable_grace = absl::GetFlag(FLAGS_unsatisfiable_grace);
  options.jobs.center_lost_grace = absl::GetFlag(FLAGS_center_lost_grace);
  if (options.jobs.center_lost_grace < absl::ZeroDuration()) return Fail("--center_lost_grace must not be negative");
  options.prometheus_url = absl::GetFlag(FLAGS_prometheus_url);
  if (options.jobs.unsatisfiable_grace < absl::ZeroDuration()) return Fail("--unsatisfiable_grace must not be negative");
  if (options.jobs.usage_report_grace <= absl::ZeroDuration()) return Fail("--usage_report_grace must be positive");
  if (options.jobs.events.retention < 1) return Fail("--job_event_retention must be at least 1");
  if (options.jobs.lease_ttl < absl::Seconds(1)) return Fail("--jobs_lease_ttl must be at least 1s");
  if (options.monitor.interval <= absl::ZeroDuration() || options.monitor.call_timeout <= absl::ZeroDuration()) {
    return Fail("--monitor_interval and --adapter_timeout must be positive");
  }
  options.registry.unknown_after = absl::GetFlag(FLAGS_center_unknown_after);
  options.registry.unavailable_after = absl::GetFlag(FLAGS_center_unavailable_after);
  options.registry.adapter_key_grace = absl::GetFlag(FLAGS_adapter_key_grace);
  if (options.registry.adapter_key_grace < absl::ZeroDuration()) return Fail("--adapter_key_grace must not be negative");
  options.require_adapter_key = absl::GetFlag(FLAGS_require_adapter_key);
  options.gateway_direct_calls = absl::GetFlag(FLAGS_gateway_direct_calls);
  if (options.registry.unknown_after >= options.registry.unavailable_after) {
    return Fail("--center_unknown_after must be shorter than --center_unavailable_after");
  }
  auto weights = jc::datamon::ParseWeights(absl::GetFlag(FLAGS_migration_weights));
  if (!weights.ok()) return Fail(std::string(weights.status().message()));
  options.migration_weights = *weights;
  options.gateway.worker_threads = absl::GetFlag(FLAGS_rest_threads);
  if (options.gateway.worker_threads < 1) return Fail("--rest_threads must be at least 1");
  options.gateway.max_worker_threads = absl::GetFlag(FLAGS_rest_max_threads);
  if (options.gateway.max_worker_threads < options.gateway.worker_threads) {
    return Fail("--rest_max_threads must be at least --rest_threads");
  }

  options.registries.ca_file = absl::GetFlag(FLAGS_registry_ca_file);
  options.registries.auth_file = absl::GetFlag(FLAGS_registry_auth_file);
  options.registries.timeout = absl::GetFlag(FLAGS_registry_timeout);
  if (options.registries.timeout < absl::Seconds(1)) return Fail("--registry_timeout must be at least 1s");
  const int64_t max_manifest = absl::GetFlag(FLAGS_registry_max_manifest_bytes);
  if (max_manifest < 1024 || max_manifest > (int64_t{1} << 30)) {
    return Fail("--registry_max_manifest_bytes must be 1024 to 1073741824");
  }
  options.registries.max_manifest_bytes = static_cast<size_t>(max_manifest);
  options.registries.max_concurrent = absl::GetFlag(FLAGS_registry_max_concurrent);
  if (options.registries.max_concurrent < 1) return Fail("--registry_max_concurrent must be at least 1");
  options.watches.per_caller = absl::GetFlag(FLAGS_max_watches_per_caller);
  if (options.watches.per_caller < 0) return Fail("--max_watches_per_caller must be 0 (no limit) or more");

  if (auto s = ConfigureAuth(&options); !s.ok()) return Fail(std::string(s.message()));

  auto app = jc::server::App::Start(std::move(options));
  if (!app.ok()) return Fail(std::string(app.status().message()));
  spdlog::info("jointcloud ready");

  jc::daemon::WaitForStop("jointcloud");
  (*app)->Shutdown();
  spdlog::info("stopped");
  return 0;
}
