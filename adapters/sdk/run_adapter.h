#pragma once

#include <sys/types.h>

// Runs an adapter: the SDK's gRPC server (jointcloud.adapter.v1.Adapter plus gRPC health)
// around a Backend, /metrics, /healthz and /readyz, the replica book and event log in a
// store, and a graceful shutdown on SIGINT/SIGTERM. A new adapter is a Backend class and
// a main() that calls RunAdapter (see docs/adapter-sdk.md).

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/sdk/backend.h"
#include "adapters/sdk/center_config.h"
#include "common/auth/tls.h"

namespace jc::adapter {

struct AdapterOptions {
  // gRPC: "unix:/path" (only `allowed_peers` may connect; SO_PEERCRED), or host:port
  // (port 0 picks a free one) with mutual TLS (`tls`), or without it only for development.
  std::string listen = "127.0.0.1:7100";
  // Who may connect on a unix: listen address; empty: root and this process's account.
  std::set<uid_t> allowed_peers;
  std::string metrics_address = "127.0.0.1:7101";  // empty: no HTTP endpoint
  // Where the replica book and events live: sqlite:///path, postgresql://..., or empty
  // for `state_dir`/adapter.db.
  std::string store;
  std::string state_dir = "./adapter-state";
  absl::Duration poll_interval = absl::Milliseconds(200);
  CenterConfig center;
  // RunAdapter refuses to start as root when the center maps no accounts (run_as) and
  // names no default `user`: its replicas would run as root. This allows it (development).
  bool allow_root_replicas = false;
  // Mutual TLS (SPEC C6): with a certificate, key and CA, the adapter serves TLS, requires
  // a client certificate signed by the CA, and takes calls only from one naming (SAN or
  // CN) an entry of `allowed_clients`: the control plane's. Its own certificate must name
  // the center (the control plane checks it against the center it registered).
  auth::TlsFiles tls;
  std::vector<std::string> allowed_clients = {"jointcloud"};
  // The center's adapter key as the control plane issued it (POST
  // /openapi/v1/centers/{id}/adapterkey), one line in a file only this account can read:
  // the adapter proves its center with it on every connection (issue 44, hole 5). Read
  // again at each proof, so a new key is taken by replacing the file. Empty: no proof (a
  // center that was issued a key is then refused by the control plane).
  std::string center_key_file;
};

class AdapterCore;

// An adapter running in this process; RunAdapter wraps one. Tests use it directly.
class AdapterServer {
 public:
  static absl::StatusOr<std::unique_ptr<AdapterServer>> Start(Backend* backend,
                                                              AdapterOptions options);
  ~AdapterServer();
  int port() const;          // the bound gRPC port (0 on a unix socket)
  // Where the control plane reaches it: "unix:/path", or "127.0.0.1:<port>" for a TCP
  // listen address (its host when it names one).
  std::string address() const;
  int metrics_port() const;  // 0 when not served
  AdapterCore& core();
  // Stops taking calls, ends watches, stops polling. Idempotent.
  void Shutdown();

 private:
  AdapterServer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serves until SIGINT or SIGTERM; returns the process exit code (0 after a clean stop,
// 1 when it cannot start, with the reason logged).
int RunAdapter(Backend& backend, AdapterOptions options);

// The flags every adapter main shares (--listen, --metrics_address, --state_dir, --store,
// --center_config, --poll_interval, --log_level), parsed into options. Exits with a
// message on bad flags or an unreadable center configuration.
AdapterOptions ParseAdapterFlags(int argc, char** argv, const char* usage);

}  // namespace jc::adapter
