#include "services/endpoints/endpoint_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <future>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/timestamp.h"
#include "common/validate.h"
#include "services/endpoints/http_head.h"
#include "services/gateway/elastic_pool.h"

namespace jc::endpoints {
namespace {

constexpr char kEnterPath[] = "/.jointcloud/enter";
constexpr size_t kMaxResponseHead = 64 << 10;
constexpr int kSendTimeoutSeconds = 30;

bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string Answer(int code, absl::string_view reason, absl::string_view body,
                   absl::string_view extra_fields = "") {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason,
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"
                      "Cache-Control: no-store\r\nConnection: close\r\nContent-Length: ",
                      body.size() + 1, "\r\n", extra_fields, "\r\n", body, "\n");
}

// Reads until the head ends, `limit` bytes, the deadline or the peer's end. The bytes read
// (possibly past the head); Unavailable when the peer went or was too slow, ResourceExhausted
// when the head is too long.
absl::StatusOr<std::string> ReadHead(int fd, absl::Time deadline, const std::atomic<bool>& stopping) {
  std::string buffer;
  char chunk[8192];
  while (!HeadEnd(buffer).has_value()) {
    if (buffer.size() > kMaxHeadBytes) return absl::ResourceExhaustedError("request head too large");
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration() || stopping.load()) return absl::UnavailableError("too slow");
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 200)));
    if (ready < 0 && errno != EINTR) return absl::UnavailableError("poll");
    if (ready <= 0) continue;
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError("the peer went");
    buffer.append(chunk, static_cast<size_t>(n));
  }
  if (*HeadEnd(buffer) > kMaxHeadBytes) return absl::ResourceExhaustedError("request head too large");
  return buffer;
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
  std::mutex mu;
  southbound::Tunnel* tunnel = nullptr;  // while one is open
  bool ended = false;
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
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint listener: cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
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
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

void EndpointProxy::Stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, conn] : connections_) conn->End();
  }
  pool_->shutdown();
}

void EndpointProxy::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (open_.load() >= options_.max_connections) {
      // Full: a short answer, best effort, rather than a connection left hanging.
      timeval tv{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      SendAll(fd, Answer(503, "Service Unavailable", "the endpoint listener is at its limit of open connections",
                         "Retry-After: 1\r\n"));
      ::close(fd);
      Count("full");
      continue;
    }
    ++open_;
    if (metrics_) metrics_->open->Increment();
    pool_->enqueue([this, fd] {
      Serve(fd);
      --open_;
      if (metrics_) metrics_->open->Decrement();
    });
  }
}

void EndpointProxy::Serve(int fd) {
  Connection conn;
  conn.fd = fd;
  timeval tv{kSendTimeoutSeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    connections_[id] = &conn;
  }
  if (!stopping_.load()) {
    auto head = ReadHead(fd, absl::Now() + options_.head_timeout, stopping_);
    if (head.ok()) {
      Proxy(conn, std::move(*head));
    } else if (absl::IsResourceExhausted(head.status())) {
      SendAll(fd, Answer(431, "Request Header Fields Too Large", "the request head is over 16 KiB"));
      Count("bad_request");
    } else {
      Count("dropped");
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections_.erase(id);
  }
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
  EndpointKey key{request.job_id(), request.task_index(), request.replica_index(), request.port_name()};
  if (HostLabel(key).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the endpoint listener cannot name ", Describe(key)));
  }
  std::string path = request.path().empty() ? "/" : request.path();
  if (absl::Status s = CheckLandingPath(path); !s.ok()) return s;
  auto ticket = passes_->Issue(caller, project, key, path);
  if (!ticket.ok()) return ticket.status();
  v1::OpenEndpointResponse out;
  out.set_origin(OriginOf(key));
  out.set_url(absl::StrCat(out.origin(), kEnterPath, "?ticket=", ticket->secret));
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
    SendAll(fd, Answer(404, "Not Found", absl::StrCat("no endpoint is named by the host \"", absl::CHexEscape(host.substr(0, 80)),
                                                      "\": endpoints are <job>-<task>-<replica>-<port>.",
                                                      options_.domain)));
    Count("unknown_host");
    return;
  }
  const std::string origin = absl::StrCat(options_.scheme, "://", host);
  const std::string cookie = CookieName();

  // A link: exchanged for a session once, then on to where it lands.
  if (TargetPath(head->second) == kEnterPath) {
    std::optional<std::string> ticket = QueryParam(head->second, "ticket");
    auto redeemed = head->first != "GET" || !ticket.has_value()
                        ? absl::StatusOr<RedeemedTicket>(absl::InvalidArgumentError("GET with ?ticket= only"))
                        : passes_->Redeem(*ticket, *key);
    if (!redeemed.ok()) {
      SendAll(fd, Answer(absl::IsInvalidArgument(redeemed.status()) ? 400 : 403, "Forbidden",
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

  // Anything else needs this endpoint's session.
  std::string other_cookies;
  std::optional<EndpointPass> pass;
  absl::Status why = absl::UnauthenticatedError("no session for this endpoint");
  for (const std::string& secret : TakeCookies(*head, cookie, &other_cookies)) {
    auto p = passes_->PassOf(secret);
    if (p.ok() && p->key == *key) {
      pass = std::move(*p);
      break;
    }
    if (!p.ok() && !absl::IsUnauthenticated(p.status())) why = p.status();
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
  // A page of another origin (another endpoint's included) may not use this one's session.
  if (auto o = head->Value("Origin"); o.has_value() && !absl::EqualsIgnoreCase(*o, origin)) {
    SendAll(fd, Answer(403, "Forbidden", absl::StrCat("a request from another origin (", absl::CHexEscape(o->substr(0, 80)),
                                                      ") may not use this endpoint's session")));
    Count("cross_origin");
    return;
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
  auto route = jobs_->RouteToEndpoint(key->job_id, key->task_index, key->replica_index, key->port_name);
  if (route.ok() && route->project != pass->project) route = absl::NotFoundError("no such endpoint");
  if (!route.ok()) {
    bool gone = absl::IsNotFound(route.status());
    SendAll(fd, Answer(gone ? 404 : 503, gone ? "Not Found" : "Service Unavailable", route.status().message()));
    Count(gone ? "not_found" : "not_running");
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (per_caller_[pass->user_name] >= options_.max_per_caller) {
      SendAll(fd, Answer(429, "Too Many Requests",
                         absl::StrCat(pass->user_name, " has ", options_.max_per_caller,
                                      " endpoint connections open, the most one user may"),
                         "Retry-After: 1\r\n"));
      Count("caller_full");
      return;
    }
    ++per_caller_[pass->user_name];
  }
  struct Release {
    EndpointProxy* self;
    std::string user;
    ~Release() {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (--self->per_caller_[user] <= 0) self->per_caller_.erase(user);
    }
  } release{this, pass->user_name};

  auto tunnel = jobs_->adapters()->OpenTunnel(route->adapter, route->key, key->port_name);
  if (!tunnel.ok()) {
    SendAll(fd, Answer(502, "Bad Gateway", tunnel.status().message()));
    Count("tunnel_refused");
    return;
  }
  {
    std::lock_guard<std::mutex> lock(conn.mu);
    if (conn.ended) return;
    conn.tunnel = tunnel->get();
  }

  // What the replica sees: its own cookies only, who is calling, and (unless it upgrades)
  // one request per connection.
  HttpHead up = *head;
  up.Remove("Cookie");
  if (!other_cookies.empty()) up.Add("Cookie", other_cookies);
  for (const char* f : {"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
                        "X-Forwarded-User", "X-Real-IP"}) {
    up.Remove(f);
  }
  up.Add("X-Forwarded-For", PeerAddress(fd));
  up.Add("X-Forwarded-Host", host);
  up.Add("X-Forwarded-Proto", options_.scheme);
  up.Add("X-Forwarded-User", pass->user_name);
  const bool upgrade = head->Lists("Connection", "upgrade") && head->Value("Upgrade").has_value();
  if (!upgrade) {
    for (const char* f : {"Connection", "Keep-Alive", "Proxy-Connection", "Upgrade"}) up.Remove(f);
    up.Add("Connection", "close");
  }
  southbound::Tunnel& t = **tunnel;
  bool sent = t.Send(up.Serialize()) && (head_end == buffer.size() || t.Send(std::string_view(buffer).substr(head_end)));

  // The replica's answer, on a second thread: its head made "Connection: close" unless it
  // switches protocols, then everything as it comes. Only this thread writes to the tunnel
  // and finishes it; the other only reads (gRPC's one reader and one writer).
  std::promise<void> down_done;
  std::future<void> down_finished = down_done.get_future();
  std::atomic<bool> wrote{false};
  std::atomic<bool> down_ended{false};
  pool_->enqueue([&, fd] {
    std::string pending;
    bool head_seen = false;
    while (auto data = t.Receive()) {
      if (!head_seen) {
        pending += *data;
        std::optional<size_t> end = HeadEnd(pending);
        if (!end.has_value() && pending.size() < kMaxResponseHead) continue;
        head_seen = true;
        if (end.has_value()) {
          auto answer = ParseResponseHead(absl::string_view(pending).substr(0, *end));
          if (answer.ok() && answer->second != "101") {
            for (const char* f : {"Connection", "Keep-Alive"}) answer->Remove(f);
            answer->Add("Connection", "close");
            pending = answer->Serialize() + pending.substr(*end);
          }
        }
        data = std::move(pending);
        pending.clear();
      }
      wrote = true;
      if (!SendAll(fd, *data)) {
        t.Cancel();
        break;
      }
    }
    if (!pending.empty()) wrote = SendAll(fd, pending) || true;  // an answer that ended inside its head
    down_ended = true;
    ::shutdown(fd, SHUT_RD);  // ends the read below; the socket still takes a 502
    down_done.set_value();
  });
  char chunk[64 << 10];
  while (sent && !down_ended.load()) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (!down_ended.load()) t.CloseSend();  // the caller is done: the answer may still come
      break;
    }
    if (!t.Send(std::string_view(chunk, static_cast<size_t>(n)))) break;
  }
  if (!sent) t.Cancel();
  // The tunnel's own limits end a replica that never answers, and Stop ends it at once.
  down_finished.wait();
  absl::Status finished = t.Finish();
  {
    std::lock_guard<std::mutex> lock(conn.mu);
    conn.tunnel = nullptr;
  }
  if (!wrote.load()) {
    // Nothing came back: the adapter refused, or the replica closed without a word.
    SendAll(fd, Answer(502, "Bad Gateway",
                       finished.ok() ? "the endpoint closed the connection without an answer"
                                     : std::string(finished.message())));
  }
  Count(wrote.load() ? (upgrade ? "upgraded" : "proxied") : "endpoint_failed");
}

}  // namespace jc::endpoints
