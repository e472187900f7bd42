#include "common/admin_server.h"

#include <set>

#include <httplib.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/rest_envelope.h"

namespace jc {
namespace {
constexpr char kJson[] = "application/json";
}  // namespace

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(absl::string_view address) {
  auto colon = address.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address \"", address, "\" is not host:port"));
  }
  return std::make_pair(std::string(address.substr(0, colon)), port);
}

void InstallAdminEndpoints(httplib::Server& s, std::shared_ptr<prometheus::Registry> metrics,
                           std::function<absl::Status()> readiness, MetricsReader sees_tenants) {
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(MakeEnvelope(absl::OkStatus(), R"({"healthy":true})"), kJson);
  });
  s.Get("/readyz", [readiness](const httplib::Request&, httplib::Response& res) {
    absl::Status ready = readiness ? readiness() : absl::OkStatus();
    if (!ready.ok()) ready = absl::UnavailableError(absl::StrCat("not ready: ", ready.message()));
    res.status = HttpStatusFor(ready.code());
    if (res.status == 503) res.set_header("Retry-After", "1");
    res.set_content(MakeEnvelope(ready, R"({"ready":true})"), kJson);
  });
  s.Get("/metrics", [metrics, sees_tenants](const httplib::Request& req, httplib::Response& res) {
    std::vector<prometheus::MetricFamily> families = metrics->Collect();
    if (sees_tenants && !sees_tenants(req.get_header_value("Authorization"), req.remote_addr)) {
      // A center's revenue and how much of it was used are an admin's and its operators'
      // (GET /openapi/v1/accounting/utilisation), not anyone's (helper-52 F1).
      static const auto* admins_only =
          new std::set<std::string>{"jc_center_revenue", "jc_center_used_hours", "jc_center_utilisation_ratio"};
      std::erase_if(families, [](const prometheus::MetricFamily& f) { return admins_only->count(f.name) > 0; });
      for (auto& family : families) {
        std::erase_if(family.metric, [](const prometheus::ClientMetric& m) {
          return std::any_of(m.label.begin(), m.label.end(), [](const auto& l) { return l.name == "project"; });
        });
      }
    }
    prometheus::TextSerializer serializer;
    res.set_content(serializer.Serialize(families), "text/plain; version=0.0.4");
  });
}

AdminServer::AdminServer(std::shared_ptr<prometheus::Registry> metrics, std::function<absl::Status()> readiness)
    : server_(std::make_unique<httplib::Server>()) {
  server_->set_tcp_nodelay(true);
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  InstallAdminEndpoints(*server_, std::move(metrics), std::move(readiness));
}

AdminServer::~AdminServer() { Stop(); }

absl::StatusOr<int> AdminServer::Start(absl::string_view address) {
  auto hp = SplitHostPort(address);
  if (!hp.ok()) return hp.status();
  const auto& [host, port] = *hp;
  int bound = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " (in use, or not a local address)"));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  WaitUntilServing(*server_);
  return bound;
}

void WaitUntilServing(const httplib::Server& server) {
  // cpp-httplib's stop() does nothing to a server whose thread has not marked it running
  // yet, and that thread then waits in accept() for ever: a stop right after a start (a
  // test's adapter, a daemon told to stop at once) hung its join. Started means running.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server.is_running() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void AdminServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace jc
