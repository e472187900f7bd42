#pragma once

// What every process serves for operators (SPEC C4), in one place: /metrics (Prometheus
// text), /healthz (alive) and /readyz (ready to take work, or 503 with the reason), with
// the REST envelope. The control plane's gateway installs the same handlers on its REST
// port; processes without REST (the nexec master, adapters, a split back end) run an
// AdminServer of their own. Envoy keeps its admin interface as its own subsystem for the
// same reason: the executor and the adapters need it without the control plane's gateway.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace httplib {
class Server;
}

namespace jc {

// "host:port" -> (host, port); InvalidArgument with the address when it is not one.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(absl::string_view address);

// Who asks for /metrics: its Authorization header and address.
using MetricsReader = std::function<bool(const std::string& authorization, const std::string& address)>;

// Returns once `server`'s listening thread (listen_after_bind) runs, so that a stop() can
// reach it (cpp-httplib ignores a stop() that comes earlier); gives up after 10 s.
void WaitUntilServing(const httplib::Server& server);

// Adds /metrics, /healthz and /readyz to `server`. `readiness` is asked on every /readyz.
// With `sees_tenants`, series that name a project (a `project` label: quotas, usage) are
// served only to a reader it admits, and so are the centers' revenue and utilisation
// (jc_center_revenue, jc_center_used_hours, jc_center_utilisation_ratio); others get every
// other series. Tenants' names and limits are theirs, a center's takings its own, and a
// REST port is reachable by more than the federation's operators.
void InstallAdminEndpoints(httplib::Server& server, std::shared_ptr<prometheus::Registry> metrics,
                           std::function<absl::Status()> readiness, MetricsReader sees_tenants = nullptr);

class AdminServer {
 public:
  AdminServer(std::shared_ptr<prometheus::Registry> metrics, std::function<absl::Status()> readiness);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds "host:port" (port 0 picks a free one), serves on a background thread, and
  // returns the port.
  absl::StatusOr<int> Start(absl::string_view address);
  void Stop();

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace jc
