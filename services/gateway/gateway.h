#pragma once

// The REST gateway: serves the routes over HTTP/1.1 (cpp-httplib) with the standard's
// envelope, plus /openapi/v1/openapi.json, /metrics, /healthz and /readyz.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "common/admin_server.h"
#include "services/gateway/route.h"

namespace httplib {
class Server;
}

namespace jc::gateway {

struct GatewayOptions {
  // Threads kept for connections, and the most there may be (one per open connection:
  // cpp-httplib holds a thread while a connection stays open; see elastic_pool.h).
  int worker_threads = 8;
  int max_worker_threads = 2048;
  // Event streams open at once (each holds a thread while open): past it a new one gets
  // 503, so streams never take the threads requests need. Kept below max_worker_threads.
  int max_event_streams = 1536;
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  size_t keep_alive_max_requests = 100000;
  int keep_alive_timeout_seconds = 5;  // an idle connection holds its thread this long
  // A read that waits longer is dropped; over HTTPS, so is a request whose head and body
  // take longer than this from its first byte (a client trickling it).
  int read_timeout_seconds = 10;
  int listen_backlog = 1024;  // connections waiting for accept (cpp-httplib's own is 5)
  std::string version = "0.1.0";
  // HTTPS with this PEM certificate and key; both empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Who may read the series of /metrics that name projects (InstallAdminEndpoints); unset:
  // everyone.
  MetricsReader sees_tenants;
};

class Gateway {
 public:
  // `readiness` is asked on every /readyz; OK means ready to take traffic.
  Gateway(std::vector<Route> routes, GatewayOptions options,
          std::shared_ptr<prometheus::Registry> metrics, std::function<absl::Status()> readiness);
  ~Gateway();

  // Binds host:port (port 0 picks a free one) and returns the port.
  absl::StatusOr<int> Bind(const std::string& host, int port);
  // Serves on a background thread until Stop().
  void Start();
  void Stop();

  const std::vector<Route>& routes() const { return routes_; }
  const std::string& openapi() const { return openapi_; }

 private:
  void Install();
  int MaxEventStreams() const;

  std::vector<Route> routes_;
  GatewayOptions options_;
  std::shared_ptr<prometheus::Registry> metrics_;
  std::function<absl::Status()> readiness_;
  std::string openapi_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  // Event streams being served, by id: Stop ends them (each holds a worker).
  std::mutex streams_mu_;
  std::map<uint64_t, std::function<void()>> streams_;
  // What handlers still working on their answer registered (CancelOnStop): called by Stop
  // too, not counted as streams.
  std::map<uint64_t, std::function<void()>> pending_;
  uint64_t next_stream_ = 0;
  bool stopping_ = false;
};

}  // namespace jc::gateway
