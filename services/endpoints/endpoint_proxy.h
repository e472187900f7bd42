#pragma once

// The endpoint listener (SPEC A17): where browsers and tools reach a running replica's named
// port, through its center's adapter (southbound::Tunnel), never directly.
//
// Every endpoint is its own origin, "<job>-<task>-<replica>-<port>.<domain>" on this
// listener (endpoint_name.h), so that what a replica serves runs neither on the console's
// origin nor on another endpoint's. A caller gets in with a link JobService.OpenEndpoint
// issued it (members of the job's project only): "/.jointcloud/enter?ticket=…" on the
// endpoint's host, good once and for a minute, sets a host-only HttpOnly cookie for that
// endpoint alone and sends the browser on. On every connection, before a byte reaches the
// replica, the listener checks the Host, the cookie, that whoever the link was issued to is
// a member of the job's project now (their API token still valid), the request's Origin
// (a page of another origin is refused, WebSockets included), and that the replica runs.
// It strips its cookie from what it passes on.
//
// One connection carries one request (it passes "Connection: close" both ways), or one
// WebSocket for as long as it stays open: bytes after the head go through untouched, so
// HTTP bodies, chunked or not, and WebSocket frames need no parsing here. A connection
// holds two threads of an elastic pool (started as the pool grows, never per request)
// while it is open; at most `max_connections` are, and `max_per_caller` for one user.
// Until its request head has arrived it holds no thread: the acceptor reads heads of
// thousands of connections on one epoll set (head_gatherer.h).

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "services/endpoints/endpoint_name.h"
#include "services/endpoints/endpoint_passes.h"
#include "services/endpoints/http_head.h"
#include "services/jobs/endpoint_activity.h"
#include "services/jobs/endpoint_tickets.h"
#include "services/jobs/job_manager.h"

namespace prometheus {
class Registry;
}

namespace jc::gateway {
class ElasticPool;
}

namespace jc::endpoints {

namespace v1 = ::jointcloud::v1;

struct EndpointProxyOptions {
  // Endpoints are hosts under this domain: a wildcard DNS name pointing at the listener
  // ("endpoints.example.com"), or "endpoints.localhost", which browsers resolve to this
  // machine without DNS.
  std::string domain = "endpoints.localhost";
  // How browsers reach the listener: "https" where a TLS proxy with a wildcard certificate
  // stands in front of it (cookies are then Secure and __Host-), else "http".
  std::string scheme = "http";
  // The port in the links it issues; 0: the port it bound.
  int public_port = 0;
  int max_connections = 512;
  int max_per_caller = 32;
  absl::Duration head_timeout = absl::Seconds(10);  // a request head slower than this is dropped
  // Connections waiting for their request head (no thread each: head_gatherer.h); past
  // this, the one waiting longest is dropped.
  int max_pending_heads = 4096;
  // How often the replicas of interactive jobs with an idleTimeout are asked for their own
  // use (PortSpec.activity_path).
  absl::Duration activity_interval = absl::Seconds(30);
};

// What the holder of a pass may do in its project now: its role, looked up again (the API
// token it was issued through still valid, the user's membership as it stands).
using RoleNow = std::function<absl::StatusOr<auth::ProjectRole>(const EndpointPass& pass)>;

class EndpointProxy final : public jobs::EndpointTickets, public jobs::EndpointActivity {
 public:
  EndpointProxy(EndpointProxyOptions options, EndpointPasses* passes, jobs::JobManager* jobs, RoleNow role_now,
                prometheus::Registry* metrics = nullptr);
  ~EndpointProxy() override;

  // Binds host:port (0: a free one); returns the port.
  absl::StatusOr<int> Bind(const std::string& host, int port);
  void Start();
  // Refuses new connections, ends the open ones, and returns once their threads are done.
  void Stop();

  absl::StatusOr<v1::OpenEndpointResponse> Issue(const auth::Principal& caller, const std::string& project,
                                                 const v1::OpenEndpointRequest& request) override;

  // "http://job-00000042-0-0-jupyter.endpoints.localhost:8081" (no trailing slash).
  std::string OriginOf(const EndpointKey& key) const;
  // The cookie its sessions go by ("__Host-jc_endpoint" over https).
  std::string CookieName() const;
  int open_connections() const { return open_.load(); }
  // The job's last use: a request through its endpoints, or what its replica reported at
  // an activity path (jobs::EndpointActivity; idle limits).
  std::optional<absl::Time> LastActivity(const std::string& job_id) override;
  // Connections waiting for their request head (those hold no thread).
  size_t waiting_heads() const { return waiting_heads_.load(); }

 private:
  struct Connection;
  struct Metrics;
  void AcceptLoop();
  // Cancels tunnels whose adapter does not answer, and ends connections whose holder is no
  // member any more.
  void WatchLoop();
  void Serve(int fd, const std::string& address, std::string head);
  // Asks the replicas that report their own use (JobManager::ActivityProbes), each
  // `activity_interval`, one at a time.
  void ActivityLoop();
  absl::StatusOr<absl::Time> Probe(const jobs::ActivityProbe& probe);
  void NoteUse(const std::string& job_id);
  void ReleasePreAuth();
  static void KeepOwnCookies(HttpHead& answer, const std::string& cookie);
  // Everything from the head read to the tunnel's end; a refusal is answered on `fd`.
  void Proxy(Connection& conn, std::string buffer);
  // A tunnel to the first of `routes` (from the next in turn) that takes it: to the port
  // `port_name`, or, with `exec`, to that command run in the replica.
  absl::StatusOr<std::unique_ptr<southbound::Tunnel>> OpenTo(Connection& conn,
                                                             const std::vector<jobs::JobManager::EndpointRoute>& routes,
                                                             const std::string& port_name,
                                                             const southbound::apb::ExecStart* exec);
  // A tool's connection (jcctl job exec, port-forward), checked like any other, switched to
  // raw bytes: "101 Switching Protocols" with `upgrade`, then the command's exec stream or
  // the port's bytes both ways, untouched, until either side ends. `early`: bytes that came
  // after the head.
  void Switch(Connection& conn, const EndpointKey& key, const EndpointPass& pass,
              const std::vector<jobs::JobManager::EndpointRoute>& routes, const char* upgrade,
              absl::string_view early, absl::string_view target);
  void Count(const char* outcome);

  EndpointProxyOptions options_;
  EndpointPasses* passes_;
  jobs::JobManager* jobs_;
  RoleNow role_now_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<gateway::ElasticPool> pool_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::thread watcher_;
  std::thread prober_;
  southbound::Tunnel* probe_tunnel_ = nullptr;  // guarded by mu_
  absl::Time probe_deadline_;                   // guarded by mu_
  std::mutex activity_mu_;
  std::map<std::string, absl::Time> used_;      // by job: the last request through its endpoints
  struct Probed {
    absl::Time tried, answered;         // its last probe, and its last one answered
    std::optional<absl::Time> reported;  // the latest use its replica reported
  };
  std::map<std::string, Probed> probed_;  // by job, those asked in the last pass
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_{0};
  std::mutex mu_;
  std::map<uint64_t, Connection*> connections_;  // open ones, to end at Stop
  std::map<std::string, int> per_caller_;        // open tunnels by user
  int pre_auth_total_ = 0;                       // connections with a head, not yet a session
  size_t pending_capacity_ = 0;                  // connections that may wait for their head
  std::atomic<size_t> waiting_heads_{0};
  uint64_t next_id_ = 0;
  std::atomic<uint64_t> next_replica_{0};  // the task endpoints' turn

  static constexpr absl::Duration kConnectTimeout = absl::Seconds(10);
  static constexpr absl::Duration kRecheck = absl::Seconds(10);
  static constexpr absl::Duration kProbeTimeout = absl::Seconds(10);
  static constexpr absl::Duration kClockSkew = absl::Seconds(5);
  static constexpr size_t kMaxActivityJobs = 100000;
  static constexpr std::chrono::seconds kCallerGoneGrace{10};
};

}  // namespace jc::endpoints
