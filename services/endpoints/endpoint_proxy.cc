#include "services/endpoints/endpoint_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <future>
#include <set>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include "common/send_all.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/timestamp.h"
#include "common/validate.h"
#include "services/endpoints/activity_probe.h"
#include "services/endpoints/head_gatherer.h"
#include "services/endpoints/http_head.h"
#include "services/gateway/elastic_pool.h"

namespace jc::endpoints {
namespace {

constexpr char kEnterPath[] = "/.jointcloud/enter";
// `jcctl job exec` and `jcctl job port-forward`: a connection that switches (101) to the
// command's exec stream or to the port's bytes, for tools (a browser can send neither
// Upgrade token).
constexpr char kExecPath[] = "/.jointcloud/exec";
constexpr char kForwardPath[] = "/.jointcloud/forward";
constexpr char kExecUpgrade[] = "jointcloud-exec";
constexpr char kForwardUpgrade[] = "jointcloud-forward";
constexpr size_t kMaxResponseHead = 64 << 10;
constexpr int kSendTimeoutSeconds = 30;


std::string Answer(int code, absl::string_view reason, absl::string_view body,
                   absl::string_view extra_fields = "") {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason,
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"
                      "Cache-Control: no-store\r\nConnection: close\r\nContent-Length: ",
                      body.size() + 1, "\r\n", extra_fields, "\r\n", body, "\n");
}

std::string PeerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

absl::Status CheckLandingPath(absl::string_view path) {
  bool ok = !path.empty() && path[0] == '/' && path.size() <= 2048 && !absl::StartsWith(path, "//");
  for (char c : path) ok &= c > 0x20 && c < 0x7f && c != '\\';
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "path: where the browser lands on the endpoint, '/' then printable ASCII without spaces or '\\', at most 2048 "
      "bytes, not starting with \"//\"");
}

}  // namespace

struct EndpointProxy::Metrics {
  prometheus::Family<prometheus::Counter>* outcomes;
  prometheus::Gauge* open;
};

struct EndpointProxy::Connection {
  int fd = -1;
  std::string address;  // the peer's
  std::mutex mu;
  southbound::Tunnel* tunnel = nullptr;  // while one is open
  bool ended = false;
  bool pre_auth = true;  // counted against its address until it shows a session
  // Once it showed a session: whose, checked again every kRecheck while it stays open.
  std::optional<EndpointPass> pass;
  absl::Time checked;
  // While its tunnel is being opened: past this, the adapter is not answering.
  absl::Time connect_deadline = absl::InfiniteFuture();
  void End() {
    std::lock_guard<std::mutex> lock(mu);
    ended = true;
    ::shutdown(fd, SHUT_RDWR);
    if (tunnel != nullptr) tunnel->Cancel();
  }
};

EndpointProxy::EndpointProxy(EndpointProxyOptions options, EndpointPasses* passes, jobs::JobManager* jobs,
                             RoleNow role_now, prometheus::Registry* metrics)
    : options_(std::move(options)), passes_(passes), jobs_(jobs), role_now_(std::move(role_now)) {
  options_.domain = absl::AsciiStrToLower(options_.domain);
  if (metrics != nullptr) {
    metrics_ = std::make_unique<Metrics>();
    metrics_->outcomes = &prometheus::BuildCounter()
                              .Name("jc_endpoint_connections_total")
                              .Help("Connections to the endpoint listener, by how they ended up (SPEC A17)")
                              .Register(*metrics);
    metrics_->open = &prometheus::BuildGauge()
                          .Name("jc_endpoint_connections_open")
                          .Help("Connections to the endpoint listener open now")
                          .Register(*metrics)
                          .Add({});
  }
  pool_ = std::make_unique<gateway::ElasticPool>(2, 2 * options_.max_connections + 2);
}

EndpointProxy::~EndpointProxy() { Stop(); }

void EndpointProxy::Count(const char* outcome) {
  if (metrics_) metrics_->outcomes->Add({{"outcome", outcome}}).Increment();
}

absl::StatusOr<int> EndpointProxy::Bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);  // [::1]
  if (int rc = ::getaddrinfo(name.empty() ? nullptr : name.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint listener: cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  // Non-blocking: the acceptor takes what is queued and goes back to reading heads.
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool bound = fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 && ::listen(fd, 1024) == 0;
  ::freeaddrinfo(found);
  if (!bound) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(absl::StrCat("endpoint listener: cannot listen on ", host, ":", port, ": ",
                                               strerror(err)));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  listen_fd_ = fd;
  return port_;
}

void EndpointProxy::Start() {
  // Every connection waiting for its head holds a descriptor: the soft limit (often 1024)
  // goes up to the hard one, and what waits is bounded by what that leaves.
  rlimit files{};
  size_t pending = static_cast<size_t>(std::max(1, options_.max_pending_heads));
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    if (files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &files);
      ::getrlimit(RLIMIT_NOFILE, &files);
    }
    // Room for the open connections, the server's own sockets and files, and then the heads.
    const rlim_t spare = static_cast<rlim_t>(options_.max_connections) + 1024;
    if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < spare + pending) {
      size_t fits = files.rlim_cur > spare + 64 ? static_cast<size_t>(files.rlim_cur - spare) : 64;
      spdlog::warn("endpoint listener: {} open files allowed: at most {} connections wait for their request head, "
                   "not {} (raise the limit with `ulimit -n` or LimitNOFILE=)",
                   files.rlim_cur, fits, pending);
      pending = fits;
    }
  }
  pending_capacity_ = pending;
  acceptor_ = std::thread([this] { AcceptLoop(); });
  watcher_ = std::thread([this] { WatchLoop(); });
  prober_ = std::thread([this] { ActivityLoop(); });
}

void EndpointProxy::Stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  if (watcher_.joinable()) watcher_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (probe_tunnel_ != nullptr) probe_tunnel_->Cancel();
  }
  if (prober_.joinable()) prober_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, conn] : connections_) conn->End();
  }
  pool_->shutdown();
}

void EndpointProxy::AcceptLoop() {
  // A short answer, best effort, rather than a connection left hanging: never waiting on a
  // peer that does not read.
  auto refuse = [this](int fd, const char* why) {
    std::string answer = Answer(503, "Service Unavailable", why, "Retry-After: 1\r\n");
    ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
    Count("full");
  };
  HeadGatherer heads(pending_capacity_, options_.head_timeout, listen_fd_,
                     [&](int fd, const std::string& address, std::string bytes, HeadGatherer::Outcome outcome) {
    switch (outcome) {
      case HeadGatherer::Outcome::kComplete:
        break;
      case HeadGatherer::Outcome::kTooLarge: {
        std::string answer = Answer(431, "Request Header Fields Too Large", "the request head is over 16 KiB");
        ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        Count("bad_request");
        return;
      }
      default:
        ::close(fd);
        Count(outcome == HeadGatherer::Outcome::kEvicted ? "evicted" : "dropped");
        return;
    }
    // A complete head: on to a thread. Those that have not shown a session yet (their
    // checks take a look-up or two) may hold half of the places at most.
    const char* refused = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (open_.load() >= options_.max_connections) {
        refused = "the endpoint listener is at its limit of open connections";
      } else if (pre_auth_total_ >= std::max(1, options_.max_connections / 2)) {
        refused = "the endpoint listener is at its limit of requests being checked";
      } else {
        ++pre_auth_total_;
        ++open_;
      }
    }
    if (refused != nullptr) return refuse(fd, refused);
    if (metrics_) metrics_->open->Increment();
    bool queued = pool_->TryEnqueue([this, fd, address, bytes = std::move(bytes)]() mutable {
      Serve(fd, address, std::move(bytes));
      --open_;
      if (metrics_) metrics_->open->Decrement();
    });
    if (!queued) {  // stopping, or no thread could be made for it
      ReleasePreAuth();
      --open_;
      if (metrics_) metrics_->open->Decrement();
      if (stopping_.load()) {
        ::close(fd);
      } else {
        refuse(fd, "the endpoint listener cannot start a thread for this connection now");
      }
    }
  });
  while (!stopping_.load()) {
    bool accepting = heads.Poll(absl::Milliseconds(200));
    waiting_heads_.store(heads.waiting());
    if (!accepting) continue;
    // Whatever the listener has queued, each connection to wait for its head.
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        heads.Add(fd, PeerAddress(fd));
        continue;
      }
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors (another surface holds them): the head waiting longest gives its
        // own up for the new connection; with none waiting, a pause rather than a spin.
        Count("no_descriptor");
        if (heads.EvictOldest()) continue;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      break;
    }
    waiting_heads_.store(heads.waiting());
  }
}

void EndpointProxy::NoteUse(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(activity_mu_);
  used_[job_id] = absl::Now();
  if (used_.size() > kMaxActivityJobs) {
    // Bounded: the half used longest ago goes (a job gone long ago, most likely).
    std::vector<std::pair<absl::Time, std::string>> by_time;
    for (const auto& [id, at] : used_) by_time.emplace_back(at, id);
    std::nth_element(by_time.begin(), by_time.begin() + by_time.size() / 2, by_time.end());
    for (size_t i = 0; i < by_time.size() / 2; ++i) used_.erase(by_time[i].second);
  }
}

std::optional<absl::Time> EndpointProxy::LastActivity(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(activity_mu_);
  const absl::Time now = absl::Now();
  std::optional<absl::Time> used;
  if (auto it = used_.find(job_id); it != used_.end()) used = it->second;
  auto it = probed_.find(job_id);
  if (it == probed_.end()) return used;  // not asked (yet): judged by its requests
  const Probed& p = it->second;
  // Fresh: two passes and a probe's time. A job the prober has not come to for longer (other
  // replicas keep it waiting: an attacker helper's jobs with 8 silent ports each) is not
  // judged on stale knowledge: it counts as in use now.
  const absl::Duration fresh = 2 * options_.activity_interval + kProbeTimeout;
  if (now - p.tried > fresh) return now;
  // A replica that reports its own use is believed over the requests that reached it (an
  // open tab polls); one whose last probe went unanswered is judged by its requests too.
  if (p.reported.has_value() && p.answered == p.tried) return p.reported;
  if (p.reported.has_value() && used.has_value()) return std::max(*p.reported, *used);
  return p.reported.has_value() ? p.reported : used;
}

void EndpointProxy::ActivityLoop() {
  absl::Time next = absl::Now();
  while (!stopping_.load()) {
    if (absl::Now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(next - absl::Now()), 1, 200)));
      continue;
    }
    next = absl::Now() + options_.activity_interval;
    std::set<std::string> asked;
    for (const jobs::ActivityProbe& probe : jobs_->ActivityProbes()) {
      if (stopping_.load()) return;
      asked.insert(probe.job_id);
      auto used = Probe(probe);
      std::lock_guard<std::mutex> lock(activity_mu_);
      Probed& p = probed_[probe.job_id];
      p.tried = absl::Now();
      if (!used.ok()) {
        spdlog::debug("endpoint listener: the activity of job {} (port {}, {}) is unknown: {}", probe.job_id,
                      probe.port_name, probe.path, std::string(used.status().message()));
        continue;
      }
      p.answered = p.tried;
      p.reported = std::max(p.reported.value_or(absl::InfinitePast()), *used);
    }
    // What is no longer asked (the job ended, or this instance no longer leads) is let go.
    std::lock_guard<std::mutex> lock(activity_mu_);
    for (auto it = probed_.begin(); it != probed_.end();) {
      it = asked.count(it->first) > 0 ? std::next(it) : probed_.erase(it);
    }
  }
}

absl::StatusOr<absl::Time> EndpointProxy::Probe(const jobs::ActivityProbe& probe) {
  auto routes = jobs_->RoutesToEndpoint(probe.job_id, probe.task_index, 0, probe.port_name);
  if (!routes.ok()) return routes.status();
  const jobs::JobManager::EndpointRoute& route = routes->front();
  auto opened = jobs_->adapters()->OpenTunnel(route.adapter, route.key, probe.port_name);
  if (!opened.ok()) return opened.status();
  southbound::Tunnel& tunnel = **opened;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.load()) return absl::CancelledError("stopping");
    probe_tunnel_ = &tunnel;  // cancelled by WatchLoop past the deadline, or by Stop
    probe_deadline_ = absl::Now() + kProbeTimeout;
  }
  struct Unregister {
    EndpointProxy* self;
    ~Unregister() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->probe_tunnel_ = nullptr;
    }
  } unregister{this};
  absl::StatusOr<absl::Time> used = absl::UnavailableError("not asked");
  if (absl::Status connected = tunnel.AwaitConnected(); !connected.ok()) {
    used = connected;
  } else {
    const std::string host = absl::StrCat(HostLabel({probe.job_id, probe.task_index, 0, probe.port_name}), ".",
                                          options_.domain);
    used = ProbeActivity(tunnel, host, probe.path, route.token);
  }
  tunnel.Cancel();
  // Only releases the call (nothing is written on its account): the answer was read, or is
  // not wanted. Cancelled is how it ends; anything else is worth a line.
  if (absl::Status finished = tunnel.Finish(); !finished.ok() && !absl::IsCancelled(finished)) {
    spdlog::debug("endpoint listener: the activity probe of job {} ended: {}", probe.job_id,
                  std::string(finished.message()));
  }
  if (!used.ok()) return used;
  // Never a time to come: a replica's word cannot hold its job open for ever. Within a few
  // seconds (two clocks) it is now; further ahead it is no answer.
  const absl::Time now = absl::Now();
  if (*used > now + kClockSkew) {
    return absl::InvalidArgumentError(absl::StrCat("last_activity ", absl::FormatTime(*used), " is to come"));
  }
  return std::min(*used, now);
}

void EndpointProxy::ReleasePreAuth() {
  std::lock_guard<std::mutex> lock(mu_);
  --pre_auth_total_;
}

void EndpointProxy::WatchLoop() {
  while (!stopping_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    absl::Time now = absl::Now();
    // Tunnels whose adapter does not answer within kConnectTimeout are cancelled; open
    // connections are checked again every kRecheck: whoever the session was issued to
    // must still be a member (a WebSocket may stay open for hours).
    std::vector<std::pair<uint64_t, EndpointPass>> due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (probe_tunnel_ != nullptr && now > probe_deadline_) probe_tunnel_->Cancel();  // an activity probe
      for (auto& [id, conn] : connections_) {
        std::lock_guard<std::mutex> c(conn->mu);
        if (conn->tunnel != nullptr && now > conn->connect_deadline) conn->tunnel->Cancel();
        if (conn->pass.has_value() && conn->pass->expires <= now) {
          conn->ended = true;  // the session is over: so is what it opened
          ::shutdown(conn->fd, SHUT_RDWR);
          if (conn->tunnel != nullptr) conn->tunnel->Cancel();
          continue;
        }
        if (conn->pass.has_value() && now - conn->checked >= kRecheck) {
          conn->checked = now;
          due.emplace_back(id, *conn->pass);
        }
      }
    }
    for (const auto& [id, pass] : due) {
      auto role = role_now_(pass);
      if (role.ok() ? *role >= auth::ProjectRole::kMember : absl::IsUnavailable(role.status())) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = connections_.find(id); it != connections_.end()) {
        it->second->End();
        Count("revoked");
      }
    }
  }
}

void EndpointProxy::Serve(int fd, const std::string& address, std::string head) {
  Connection conn;
  conn.fd = fd;
  conn.address = address;
  timeval tv{kSendTimeoutSeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    connections_[id] = &conn;
  }
  if (!stopping_.load()) Proxy(conn, std::move(head));
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections_.erase(id);
  }
  if (conn.pre_auth) ReleasePreAuth();
  std::lock_guard<std::mutex> lock(conn.mu);
  ::close(fd);
}

std::string EndpointProxy::OriginOf(const EndpointKey& key) const {
  int port = options_.public_port > 0 ? options_.public_port : port_;
  bool default_port = (options_.scheme == "http" && port == 80) || (options_.scheme == "https" && port == 443);
  return absl::StrCat(options_.scheme, "://", HostLabel(key), ".", options_.domain,
                      default_port ? "" : absl::StrCat(":", port));
}

std::string EndpointProxy::CookieName() const {
  return options_.scheme == "https" ? "__Host-jc_endpoint" : "jc_endpoint";
}

absl::StatusOr<v1::OpenEndpointResponse> EndpointProxy::Issue(const auth::Principal& caller,
                                                              const std::string& project,
                                                              const v1::OpenEndpointRequest& request) {
  const bool exec = request.has_exec();
  EndpointKey key{request.job_id(), request.task_index(),
                  request.all_replicas() ? kTaskEndpoint : request.replica_index(),
                  exec ? std::string() : request.port_name()};
  if (HostLabel(key).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the endpoint listener cannot name ", Describe(key)));
  }
  std::string path = request.path().empty() || exec ? "/" : request.path();
  if (absl::Status s = CheckLandingPath(path); !s.ok()) return s;
  std::optional<ExecSpec> command;
  if (exec) command = ExecSpec{{request.exec().command().begin(), request.exec().command().end()}, request.exec().tty()};
  auto ticket = passes_->Issue(caller, project, key, path, command);
  if (!ticket.ok()) return ticket.status();
  v1::OpenEndpointResponse out;
  out.set_origin(OriginOf(key));
  out.set_url(absl::StrCat(out.origin(), exec ? kExecPath : kEnterPath, "?ticket=", ticket->secret));
  *out.mutable_expires_at() = ToTimestamp(ticket->expires);
  return out;
}

void EndpointProxy::Proxy(Connection& conn, std::string buffer) {
  const int fd = conn.fd;
  size_t head_end = *HeadEnd(buffer);
  auto head = ParseRequestHead(absl::string_view(buffer).substr(0, head_end));
  if (!head.ok()) {
    SendAll(fd, Answer(400, "Bad Request", head.status().message()));
    Count("bad_request");
    return;
  }
  const std::string host = absl::AsciiStrToLower(*head->Value("Host"));
  std::optional<EndpointKey> key = EndpointOfHost(host, options_.domain);
  if (!key.has_value()) {
    SendAll(fd, Answer(404, "Not Found",
                       absl::StrCat("no endpoint is named by the host \"", absl::CHexEscape(host.substr(0, 80)),
                                    "\": endpoints are <job>-<task>-<replica>-<port>.", options_.domain,
                                    " and <job>-<task>-<port>.", options_.domain)));
    Count("unknown_host");
    return;
  }
  const std::string origin = absl::StrCat(options_.scheme, "://", host);
  const std::string cookie = CookieName();
  const absl::string_view target = TargetPath(head->second);
  // A tool's connection that switches to raw bytes: a command's exec stream, a port's bytes.
  const bool exec = target == kExecPath;
  const bool forwarding = target == kForwardPath;
  if (exec || forwarding) {
    const char* token = exec ? kExecUpgrade : kForwardUpgrade;
    auto framing = RequestBodyFraming(*head);
    if (head->first != "GET" || !head->Lists("Connection", "upgrade") || !head->Lists("Upgrade", token) ||
        !framing.ok() || framing->chunked || framing->length > 0) {
      SendAll(fd, Answer(400, "Bad Request",
                         absl::StrCat(target, " takes a GET without a body, with \"Connection: Upgrade\" and "
                                      "\"Upgrade: ", token, "\" (jcctl job ", exec ? "exec" : "port-forward", ")")));
      Count("bad_request");
      return;
    }
    if (exec != key->port_name.empty()) {
      SendAll(fd, Answer(404, "Not Found",
                         exec ? "commands run at a replica's own host name (<job>-<task>-<replica>), not a port's"
                              : "a port is forwarded at its own host name (<job>-<task>-<replica>-<port>)"));
      Count("not_found");
      return;
    }
  } else if (key->port_name.empty()) {
    SendAll(fd, Answer(404, "Not Found", absl::StrCat("this host runs commands in ", Describe(*key),
                                                      " for `jcctl job exec`; it serves no pages")));
    Count("not_found");
    return;
  }

  // A link: exchanged for a session once, then on to where it lands.
  if (target == kEnterPath && !key->port_name.empty()) {
    std::optional<std::string> ticket = QueryParam(head->second, "ticket");
    auto redeemed = head->first != "GET" || !ticket.has_value()
                        ? absl::StatusOr<RedeemedTicket>(absl::InvalidArgumentError("GET with ?ticket= only"))
                        : passes_->Redeem(*ticket, *key);
    if (!redeemed.ok()) {
      bool bad = absl::IsInvalidArgument(redeemed.status());
      SendAll(fd, Answer(bad ? 400 : 403, bad ? "Bad Request" : "Forbidden",
                         absl::StrCat(redeemed.status().message(),
                                      ". Open the endpoint again from the console or with `jcctl job open`.")));
      Count("link_refused");
      return;
    }
    int64_t max_age = std::max<int64_t>(1, absl::ToInt64Seconds(redeemed->expires - absl::Now()));
    std::string set_cookie = absl::StrCat("Set-Cookie: ", cookie, "=", redeemed->session_secret,
                                          "; Path=/; HttpOnly; SameSite=Lax; Max-Age=", max_age,
                                          options_.scheme == "https" ? "; Secure" : "", "\r\n");
    SendAll(fd, absl::StrCat("HTTP/1.1 303 See Other\r\nLocation: ", redeemed->landing_path, "\r\n", set_cookie,
                             "Referrer-Policy: no-referrer\r\nCache-Control: no-store\r\nConnection: close\r\n"
                             "Content-Length: 0\r\n\r\n"));
    Count("link_opened");
    return;
  }

  // Anything else needs this endpoint's session: one. A second one beside it was put there
  // by another endpoint's page (cookies of a parent domain): whose is which cannot be told.
  // A command runs with its own link instead, once: the session it opens is never handed out.
  std::string other_cookies;
  std::vector<std::string> sessions = TakeCookies(*head, cookie, &other_cookies);
  if (exec) {
    std::optional<std::string> ticket = QueryParam(head->second, "ticket");
    auto redeemed = !ticket.has_value() ? absl::StatusOr<RedeemedTicket>(absl::InvalidArgumentError("no ?ticket="))
                                        : passes_->Redeem(*ticket, *key);
    if (!redeemed.ok()) {
      bool bad = absl::IsInvalidArgument(redeemed.status());
      SendAll(fd, Answer(bad ? 400 : 403, bad ? "Bad Request" : "Forbidden",
                         absl::StrCat(redeemed.status().message(), ". Run `jcctl job exec` again.")));
      Count("link_refused");
      return;
    }
    sessions = {redeemed->session_secret};
  }
  if (sessions.size() > 1) {
    SendAll(fd, Answer(400, "Bad Request",
                       "more than one endpoint session came with this request (another endpoint's page may have set "
                       "one): clear this site's cookies and open the endpoint again"));
    Count("bad_request");
    return;
  }
  std::optional<EndpointPass> pass;
  absl::Status why = absl::UnauthenticatedError("no session for this endpoint");
  if (sessions.size() == 1) {
    auto p = passes_->PassOf(sessions[0]);
    if (p.ok() && p->key == *key) {
      pass = std::move(*p);
    } else if (!p.ok() && !absl::IsUnauthenticated(p.status())) {
      why = p.status();
    }
  }
  if (!pass.has_value()) {
    bool unavailable = absl::IsUnavailable(why);
    SendAll(fd, Answer(unavailable ? 503 : 401, unavailable ? "Service Unavailable" : "Unauthorized",
                       unavailable ? std::string(why.message())
                                   : absl::StrCat("This endpoint (", Describe(*key),
                                                  ") opens with a link: use \"Open\" on the job's page in the console, "
                                                  "or `jcctl job open ", key->job_id, "`.")));
    Count(unavailable ? "unavailable" : "unauthenticated");
    return;
  }
  // A page of another origin (another endpoint's included) may not use this one's session:
  // not by a request that says where it comes from (Origin, WebSockets included), nor by a
  // subresource or a frame of another site (the browser's Fetch Metadata).
  if (auto o = head->Value("Origin"); o.has_value() && !absl::EqualsIgnoreCase(*o, origin)) {
    SendAll(fd, Answer(403, "Forbidden", absl::StrCat("a request from another origin (", absl::CHexEscape(o->substr(0, 80)),
                                                      ") may not use this endpoint's session")));
    Count("cross_origin");
    return;
  }
  if (auto site = head->Value("Sec-Fetch-Site"); site.has_value() && *site != "same-origin" && *site != "none") {
    std::string mode = head->Value("Sec-Fetch-Mode").value_or("");
    std::string dest = head->Value("Sec-Fetch-Dest").value_or("");
    if (mode != "navigate" || (dest != "document" && !dest.empty())) {
      SendAll(fd, Answer(403, "Forbidden",
                         absl::StrCat("a ", absl::CHexEscape(site->substr(0, 20)),
                                      " request that is not a page of its own (", absl::CHexEscape(dest.substr(0, 20)),
                                      ") may not use this endpoint's session")));
      Count("cross_origin");
      return;
    }
  }
  auto role = role_now_(*pass);
  if (!role.ok() || *role < auth::ProjectRole::kMember) {
    // A credential gone (its token revoked or expired, its user deleted) is no session any
    // more; a user who is no member now is refused.
    int code = role.ok() ? 403 : absl::IsUnavailable(role.status()) ? 503 : absl::IsUnauthenticated(role.status()) ? 401 : 403;
    SendAll(fd, Answer(code, code == 503 ? "Service Unavailable" : code == 401 ? "Unauthorized" : "Forbidden",
                       !role.ok() ? absl::StrCat(role.status().message(), ": open the endpoint again")
                                  : absl::StrCat(pass->user_name, " is not a member of project \"", pass->project,
                                                 "\" now: only members open its endpoints")));
    Count(code == 503 ? "unavailable" : code == 401 ? "unauthenticated" : "forbidden");
    return;
  }
  auto routes = jobs_->RoutesToEndpoint(key->job_id, key->task_index, key->replica_index, key->port_name);
  if (routes.ok() && routes->front().project != pass->project) routes = absl::NotFoundError("no such endpoint");
  if (!routes.ok()) {
    bool gone = absl::IsNotFound(routes.status());
    SendAll(fd, Answer(gone ? 404 : 503, gone ? "Not Found" : "Service Unavailable", routes.status().message()));
    Count(gone ? "not_found" : "not_running");
    return;
  }
  bool caller_full = false;
  {
    // Never a send under mu_: the acceptor takes it for every head.
    std::lock_guard<std::mutex> lock(mu_);
    caller_full = per_caller_[pass->user_name] >= options_.max_per_caller;
    if (!caller_full) ++per_caller_[pass->user_name];
  }
  if (caller_full) {
    SendAll(fd, Answer(429, "Too Many Requests",
                       absl::StrCat(pass->user_name, " has ", options_.max_per_caller,
                                    " endpoint connections open, the most one user may"),
                       "Retry-After: 1\r\n"));
    Count("caller_full");
    return;
  }
  struct Release {
    EndpointProxy* self;
    std::string user;
    ~Release() {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (--self->per_caller_[user] <= 0) self->per_caller_.erase(user);
    }
  } release{this, pass->user_name};
  ReleasePreAuth();
  {
    std::lock_guard<std::mutex> lock(conn.mu);
    conn.pre_auth = false;
    conn.pass = *pass;
    conn.checked = absl::Now();
  }
  NoteUse(key->job_id);  // a request through it: the job is in use (idle limits)
  if (exec || forwarding) {
    Switch(conn, *key, *pass, *routes, exec ? kExecUpgrade : kForwardUpgrade,
           absl::string_view(buffer).substr(head_end), head->second);
    return;
  }

  // What the replica sees: its own cookies only, who is calling (never a caller's own
  // forwarding fields, in any spelling), and one request per connection unless it is a
  // WebSocket.
  HttpHead up = *head;
  up.Remove("Cookie");
  if (!other_cookies.empty()) up.Add("Cookie", other_cookies);
  for (const char* f : {"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-User",
                        "X-Real-IP"}) {
    up.RemoveLike(f);
  }
  up.Add("X-Forwarded-For", conn.address);
  up.Add("X-Forwarded-Host", host);
  up.Add("X-Forwarded-Proto", options_.scheme);
  up.Add("X-Forwarded-User", pass->user_name);
  // The listener proves itself to the replica with the job's endpoint token (its replicas
  // have it as JC_ENDPOINT_TOKEN; Jupyter reads it as JUPYTER_TOKEN), unless the caller
  // brings a credential of its own for the replica. Other processes on the replica's host
  // reach its port without the listener; they lack the token.
  if (!routes->front().token.empty() && head->Values("Authorization").empty()) {
    up.Add("Authorization", absl::StrCat("token ", routes->front().token));
  }
  const bool websocket = head->Lists("Connection", "upgrade") && head->Lists("Upgrade", "websocket");
  // Where the request ends: bytes after it are another request, which is never passed.
  auto framing = RequestBodyFraming(*head);
  if (!framing.ok() || (websocket && (framing->chunked || framing->length > 0))) {
    SendAll(fd, Answer(400, "Bad Request", framing.ok() ? "a WebSocket request has no body" : framing.status().message()));
    Count("bad_request");
    return;
  }
  for (const char* f : {"Connection", "Keep-Alive", "Proxy-Connection", "Upgrade", "HTTP2-Settings"}) up.Remove(f);
  if (websocket) {
    // Exactly these: a caller's own Connection tokens would make a proxy in the replica
    // drop the fields the listener set.
    up.Add("Connection", "Upgrade");
    up.Add("Upgrade", "websocket");
  } else {
    up.Add("Connection", "close");
  }

  // A tunnel to the replica (for the task's endpoint, the next ready replica in turn, and
  // the one after it when a replica's port does not take the connection).
  auto opened = OpenTo(conn, *routes, key->port_name, nullptr);
  if (!opened.ok()) {
    if (absl::IsCancelled(opened.status())) return;
    SendAll(fd, Answer(502, "Bad Gateway", opened.status().message()));
    Count("tunnel_refused");
    return;
  }
  std::unique_ptr<southbound::Tunnel> tunnel = std::move(*opened);
  southbound::Tunnel& t = *tunnel;

  // The replica's answer, on a second thread. Its interim heads (1xx) pass; its final head
  // is made "Connection: close" and loses any cookie it would set beyond its own host or in
  // the listener's name, and from then on nothing more of the caller's is passed (bytes
  // after the request are another request, which would get none of the checks above). A
  // 101 to a WebSocket request makes the connection the WebSocket's. A head that does not
  // parse, or is too long, ends the connection. Only the caller's thread (below) writes to
  // the tunnel and finishes it; this one only reads (gRPC's one reader, one writer).
  struct Shared {
    std::atomic<bool> wrote{false}, final_answer{false}, down_ended{false}, upgraded{false};
    std::promise<void> done;
  };
  auto shared = std::make_shared<Shared>();
  std::future<void> down_finished = shared->done.get_future();
  const std::string method = head->first;
  auto down = [this, shared, &t, fd, websocket, cookie, method] {
    std::string pending;
    bool in_head = true;
    // The final answer's body, followed to its end: a replica that keeps its connection
    // after it is not waited for.
    std::optional<BodyFraming> answer_body;
    uint64_t answer_left = 0;
    ChunkedBody answer_chunks;
    // Passes `data` of the answer's body; false once it ended (or the caller went).
    auto pass_body = [&](absl::string_view data) {
      size_t n = data.size();
      bool ended = false;
      if (answer_body.has_value() && !answer_body->until_close) {
        if (answer_body->chunked) {
          auto took = answer_chunks.Take(data);
          n = took.ok() ? *took : data.size();
          ended = !took.ok() || answer_chunks.done();
        } else {
          n = static_cast<size_t>(std::min<uint64_t>(answer_left, data.size()));
          answer_left -= n;
          ended = answer_left == 0;
        }
      }
      shared->wrote = true;
      if (n > 0 && !SendAll(fd, data.substr(0, n))) return false;
      return !ended;
    };
    bool ended = false;
    while (!ended) {
      auto data = t.Receive();
      if (!data.has_value()) break;
      if (!in_head) {
        if (!pass_body(*data)) break;
        continue;
      }
      pending += *data;
      bool broken = false;
      while (in_head) {
        std::optional<size_t> end = HeadEnd(pending);
        if (!end.has_value()) {
          broken = pending.size() > kMaxResponseHead;
          break;
        }
        auto answer = ParseResponseHead(absl::string_view(pending).substr(0, *end));
        if (!answer.ok() || !std::all_of(answer->second.begin(), answer->second.end(), absl::ascii_isdigit) ||
            (answer->second == "101" && !websocket)) {
          broken = true;
          break;
        }
        // Every head the browser gets, interim ones and a 101 too, keeps cookies to the
        // replica's own host.
        KeepOwnCookies(*answer, cookie);
        std::string out;
        if (answer->second == "101") {
          out = answer->Serialize();
          in_head = false;
          shared->upgraded = true;
        } else if (answer->second[0] == '1') {
          out = answer->Serialize();  // 100 Continue, 103 Early Hints: the final head follows
        } else {
          // From now on the caller's thread passes nothing more of its (it still reads, to
          // see it go).
          shared->final_answer = true;
          auto framing = ResponseBodyFraming(*answer, method);
          if (!framing.ok()) {
            broken = true;
            break;
          }
          answer_body = *framing;
          answer_left = framing->length;
          for (const char* f : {"Connection", "Keep-Alive"}) answer->Remove(f);
          answer->Add("Connection", "close");
          answer->Add("Content-Security-Policy", "frame-ancestors 'self'");
          out = answer->Serialize();
          in_head = false;
        }
        pending.erase(0, *end);
        shared->wrote = true;
        if (!SendAll(fd, out)) {
          broken = true;
          break;
        }
      }
      if (broken) {
        t.Cancel();
        pending.clear();
        break;
      }
      if (!in_head) {
        // The answer's head is out: its body so far, unless it had none.
        bool more = answer_body.has_value() && !answer_body->until_close && !answer_body->chunked &&
                            answer_left == 0
                        ? false
                        : pending.empty() || pass_body(pending);
        pending.clear();
        if (!more) ended = true;
      }
    }
    // The answer is whole (the replica's connection is not kept), the caller went, or the
    // tunnel ended: nothing more comes through it either way.
    t.Cancel();
    shared->down_ended = true;
    ::shutdown(fd, SHUT_RD);  // ends the caller's read; the socket still takes a 502
    shared->done.set_value();
  };
  if (!pool_->TryEnqueue(down)) {  // stopping
    t.Cancel();
    {
      std::lock_guard<std::mutex> lock(conn.mu);
      conn.tunnel = nullptr;
    }
    // The listener is stopping and the tunnel was cancelled: how it ended changes nothing
    // (no write of ours depends on it); Finish only releases the call.
    t.Finish().IgnoreError();
    return;
  }
  // The caller's bytes: the request's body as framed, then nothing more — but a WebSocket's
  // frames once the replica switched (held until then).
  uint64_t body_left = framing->length;
  ChunkedBody chunks;
  bool body_done = !framing->chunked && body_left == 0;
  std::string held;
  // False when the tunnel takes no more, or the body is malformed.
  auto forward = [&](std::string_view data) {
    while (!data.empty()) {
      if (shared->upgraded.load()) {
        if (!held.empty() && !t.Send(held)) return false;
        held.clear();
        return t.Send(data);
      }
      if (body_done) {
        if (!websocket) return true;  // after the request: never passed
        if (held.size() + data.size() > kMaxHeadBytes) return false;  // too much before the 101
        held.append(data);
        return true;
      }
      size_t n = 0;
      if (framing->chunked) {
        auto took = chunks.Take(absl::string_view(data.data(), data.size()));
        if (!took.ok()) return false;
        n = *took;
        body_done = chunks.done();
      } else {
        n = static_cast<size_t>(std::min<uint64_t>(body_left, data.size()));
        body_left -= n;
        body_done = body_left == 0;
      }
      if (n > 0 && !t.Send(data.substr(0, n))) return false;
      data.remove_prefix(n);
    }
    return true;
  };
  bool sent = t.Send(up.Serialize()) && forward(std::string_view(buffer).substr(head_end));
  bool caller_left = false;
  absl::Time last_noted = absl::Now();
  char chunk[64 << 10];
  while (sent && !shared->down_ended.load()) {
    ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
    if (got < 0 && errno == EINTR) continue;
    if (shared->down_ended.load()) break;  // the answer is out (its thread shut this read)
    if (got == 0 && !shared->final_answer.load()) {
      t.CloseSend();  // the caller is done sending: its answer may still come
      caller_left = true;
      break;
    }
    if (got <= 0) {
      t.Cancel();  // the caller went while its answer came: nobody reads the rest
      break;
    }
    if (shared->final_answer.load()) continue;  // the answer began: what follows is not passed
    if (shared->upgraded.load() && absl::Now() - last_noted >= absl::Seconds(1)) {
      last_noted = absl::Now();  // a WebSocket the caller writes to is in use
      NoteUse(key->job_id);
    }
    if (!forward(std::string_view(chunk, static_cast<size_t>(got)))) {
      t.Cancel();
      break;
    }
  }
  if (!sent) t.Cancel();
  // A caller gone does not wait long for an answer nobody reads; Stop ends it at once.
  if (caller_left && down_finished.wait_for(kCallerGoneGrace) != std::future_status::ready) t.Cancel();
  down_finished.wait();
  absl::Status finished = t.Finish();
  {
    std::lock_guard<std::mutex> lock(conn.mu);
    conn.tunnel = nullptr;
  }
  if (!shared->wrote.load()) {
    // Nothing came back: the adapter refused, or the replica closed without a word.
    SendAll(fd, Answer(502, "Bad Gateway",
                       finished.ok() ? "the endpoint gave no answer that could be passed on"
                                     : std::string(finished.message())));
  }
  Count(shared->wrote.load() ? (websocket ? "upgraded" : "proxied") : "endpoint_failed");
}

absl::StatusOr<std::unique_ptr<southbound::Tunnel>> EndpointProxy::OpenTo(
    Connection& conn, const std::vector<jobs::JobManager::EndpointRoute>& routes, const std::string& port_name,
    const southbound::apb::ExecStart* exec) {
  absl::Status last = absl::UnavailableError("no replica took the connection");
  const size_t n = routes.size();
  const size_t first = n > 1 ? next_replica_.fetch_add(1) % n : 0;
  for (size_t i = 0; i < n; ++i) {
    const auto& route = routes[(first + i) % n];
    auto opened = exec != nullptr ? jobs_->adapters()->OpenExec(route.adapter, route.key, *exec)
                                  : jobs_->adapters()->OpenTunnel(route.adapter, route.key, port_name);
    if (!opened.ok()) {
      last = opened.status();
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(conn.mu);
      if (conn.ended) return absl::CancelledError("the listener is stopping");
      conn.tunnel = opened->get();
      conn.connect_deadline = absl::Now() + kConnectTimeout;
    }
    absl::Status connected = (*opened)->AwaitConnected();
    {
      std::lock_guard<std::mutex> lock(conn.mu);
      conn.connect_deadline = absl::InfiniteFuture();
      if (!connected.ok()) conn.tunnel = nullptr;
    }
    if (connected.ok()) return std::move(*opened);
    last = connected;
  }
  return last;
}

void EndpointProxy::Switch(Connection& conn, const EndpointKey& key, const EndpointPass& pass,
                           const std::vector<jobs::JobManager::EndpointRoute>& routes, const char* upgrade,
                           absl::string_view early, absl::string_view target) {
  const int fd = conn.fd;
  const bool exec = key.port_name.empty();
  southbound::apb::ExecStart start;
  if (exec) {
    if (!pass.exec.has_value() || pass.exec->command.empty()) {
      SendAll(fd, Answer(403, "Forbidden", "this link runs no command"));
      Count("forbidden");
      return;
    }
    for (const std::string& arg : pass.exec->command) start.add_command(arg);
    start.set_tty(pass.exec->tty);
    int rows = 0, cols = 0;
    if (auto r = QueryParam(target, "rows"); r.has_value() && absl::SimpleAtoi(*r, &rows) && rows > 0 && rows < 10000) {
      start.set_rows(rows);
    }
    if (auto c = QueryParam(target, "cols"); c.has_value() && absl::SimpleAtoi(*c, &cols) && cols > 0 && cols < 10000) {
      start.set_cols(cols);
    }
    start.set_user(pass.user_name);
  }
  auto opened = OpenTo(conn, routes, key.port_name, exec ? &start : nullptr);
  if (!opened.ok()) {
    if (absl::IsCancelled(opened.status())) return;
    // The adapter's refusal, as the caller can act on it.
    const absl::Status& why = opened.status();
    int code = absl::IsFailedPrecondition(why) ? 409
               : absl::IsNotFound(why)         ? 404
               : absl::IsUnimplemented(why)    ? 501
               : absl::IsInvalidArgument(why)  ? 400
               : absl::IsResourceExhausted(why) ? 503
                                                : 502;
    const char* reason = code == 409   ? "Conflict"
                         : code == 404 ? "Not Found"
                         : code == 501 ? "Not Implemented"
                         : code == 400 ? "Bad Request"
                         : code == 503 ? "Service Unavailable"
                                       : "Bad Gateway";
    SendAll(fd, Answer(code, reason, why.message()));
    Count(exec ? "exec_refused" : "tunnel_refused");
    return;
  }
  std::unique_ptr<southbound::Tunnel> tunnel = std::move(*opened);
  southbound::Tunnel& t = *tunnel;
  if (!SendAll(fd, absl::StrCat("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ", upgrade,
                                "\r\n\r\n"))) {
    t.Cancel();
    t.Finish().IgnoreError();  // the caller went before a byte: nothing depends on how
    std::lock_guard<std::mutex> lock(conn.mu);
    conn.tunnel = nullptr;
    return;
  }
  // The replica's bytes (or the command's stream) to the caller, on a second thread; the
  // caller's to the replica on this one. Either side's end is passed on as a half-close.
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> down_finished = done->get_future();
  auto down = [&t, fd, done] {
    while (auto data = t.Receive()) {
      if (!SendAll(fd, *data)) {
        t.Cancel();
        break;
      }
    }
    ::shutdown(fd, SHUT_WR);
    done->set_value();
  };
  if (!pool_->TryEnqueue(down)) {  // stopping
    t.Cancel();
    t.Finish().IgnoreError();  // cancelled by us: how it ended changes nothing, Finish only releases the call
    std::lock_guard<std::mutex> lock(conn.mu);
    conn.tunnel = nullptr;
    return;
  }
  bool sent = early.empty() || t.Send(std::string_view(early.data(), early.size()));
  absl::Time last_noted = absl::Now();
  char chunk[64 << 10];
  while (sent) {
    ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0 && !exec) {
      t.CloseSend();  // the caller sends no more: what comes back still goes to it
      break;
    }
    if (got <= 0) {
      // Gone. A command's caller says the end of its input in the stream and closes only
      // once the exit status came: one that closes before is gone, and so is the command.
      t.Cancel();
      break;
    }
    if (absl::Now() - last_noted >= absl::Seconds(1)) {
      last_noted = absl::Now();  // bytes from the caller: the job is in use
      NoteUse(key.job_id);
    }
    sent = t.Send(std::string_view(chunk, static_cast<size_t>(got)));
  }
  if (!sent) t.Cancel();
  down_finished.wait();
  absl::Status finished = t.Finish();
  {
    std::lock_guard<std::mutex> lock(conn.mu);
    conn.tunnel = nullptr;
  }
  if (!finished.ok()) {
    spdlog::debug("endpoint listener: {} of {} ended: {}", exec ? "a command" : "a forward", Describe(key),
                  std::string(finished.message()));
  }
  Count(exec ? "exec" : "forwarded");
}

void EndpointProxy::KeepOwnCookies(HttpHead& answer, const std::string& cookie) {
  // A replica sets cookies for its own host only, and never one in the listener's names:
  // one for the parent domain would reach every other endpoint.
  std::vector<std::string> kept;
  for (const std::string& set : answer.Values("Set-Cookie")) {
    std::string lower = absl::AsciiStrToLower(set);
    absl::string_view name = absl::StripAsciiWhitespace(absl::string_view(set).substr(0, set.find('=')));
    bool domain = false;
    for (absl::string_view attribute : absl::StrSplit(lower, ';')) {
      domain |= absl::StartsWith(absl::StripLeadingAsciiWhitespace(attribute), "domain");
    }
    if (domain || absl::EqualsIgnoreCase(name, cookie) || absl::EqualsIgnoreCase(name, "jc_endpoint") ||
        absl::EqualsIgnoreCase(name, "__Host-jc_endpoint")) {
      continue;
    }
    kept.push_back(set);
  }
  answer.Remove("Set-Cookie");
  for (std::string& set : kept) answer.Add("Set-Cookie", std::move(set));
}

}  // namespace jc::endpoints
