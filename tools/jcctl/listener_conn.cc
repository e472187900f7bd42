#include "tools/jcctl/listener_conn.h"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <regex>
#include <thread>

#include "common/send_all.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace jc::jcctl {
namespace {

constexpr size_t kMaxHead = 64 << 10;


absl::Status StatusOfAnswer(int code, const std::string& body) {
  std::string message(absl::StripAsciiWhitespace(body));
  if (message.empty()) message = absl::StrCat("the endpoint listener answered ", code);
  switch (code) {
    case 400: return absl::InvalidArgumentError(message);
    case 401: return absl::UnauthenticatedError(message);
    case 403: return absl::PermissionDeniedError(message);
    case 404: return absl::NotFoundError(message);
    case 409: return absl::FailedPreconditionError(message);
    case 429: return absl::ResourceExhaustedError(message);
    case 501: return absl::UnimplementedError(message);
    default: return absl::UnavailableError(message);
  }
}

// Reads an answer's head (and what came after it) from `fd`.
struct Answer {
  int code = 0;
  std::string head;  // status line and fields
  std::string rest;  // bytes after the head
};
absl::StatusOr<Answer> ReadAnswer(ListenerConn& conn) {
  std::string buffer;
  char chunk[4096];
  while (true) {
    if (size_t end = buffer.find("\r\n\r\n"); end != std::string::npos) {
      Answer out;
      out.head = buffer.substr(0, end);
      out.rest = buffer.substr(end + 4);
      std::vector<std::string> status = absl::StrSplit(out.head.substr(0, out.head.find("\r\n")), ' ');
      if (status.size() < 2 || !absl::StartsWith(status[0], "HTTP/1.") || !absl::SimpleAtoi(status[1], &out.code)) {
        return absl::UnavailableError("the endpoint listener's answer is not HTTP");
      }
      return out;
    }
    if (buffer.size() > kMaxHead) return absl::UnavailableError("the endpoint listener's answer head is too long");
    ssize_t n = conn.Receive(chunk, sizeof chunk);
    if (n <= 0) return absl::UnavailableError("the endpoint listener closed the connection without an answer");
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

// The body of a refusal (the listener closes after it).
std::string ReadRest(ListenerConn& conn, std::string rest) {
  char chunk[4096];
  while (rest.size() < kMaxHead) {
    ssize_t n = conn.Receive(chunk, sizeof chunk);
    if (n <= 0) break;
    rest.append(chunk, static_cast<size_t>(n));
  }
  return rest;
}

std::string Request(const ListenerLink& link, const std::string& target, const std::string& upgrade,
                    const std::string& cookie) {
  std::string out = absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: ", link.host_header, "\r\n");
  if (!upgrade.empty()) absl::StrAppend(&out, "Connection: Upgrade\r\nUpgrade: ", upgrade, "\r\n");
  if (!cookie.empty()) absl::StrAppend(&out, "Cookie: ", cookie, "\r\n");
  absl::StrAppend(&out, "User-Agent: jcctl\r\n\r\n");
  return out;
}

}  // namespace

absl::StatusOr<ListenerLink> ParseLink(const std::string& url, const std::string& ca_file) {
  static const std::regex kUrl(R"(^(https?)://([A-Za-z0-9.\-]+)(:(\d{1,5}))?(/.*)$)");
  std::smatch m;
  if (!std::regex_match(url, m, kUrl)) {
    return absl::InvalidArgumentError(absl::StrCat("the server gave a link jcctl cannot follow: ", url.substr(0, 120)));
  }
  ListenerLink link;
  link.tls = m[1] == "https";
  link.ca_file = ca_file;
  link.host = absl::AsciiStrToLower(m[2].str());
  link.port = link.tls ? 443 : 80;
  if (m[4].matched && (!absl::SimpleAtoi(m[4].str(), &link.port) || link.port < 1 || link.port > 65535)) {
    return absl::InvalidArgumentError("the link's port is not a port");
  }
  link.host_header = m[3].matched ? absl::StrCat(link.host, ":", link.port) : link.host;
  // Names under "localhost" are this machine (RFC 6761), resolver or not.
  link.connect_host =
      link.host == "localhost" || absl::EndsWith(link.host, ".localhost") ? "127.0.0.1" : link.host;
  link.target = m[5].str();
  return link;
}

namespace {

absl::StatusOr<int> DialSocket(const ListenerLink& link) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(link.connect_host.c_str(), std::to_string(link.port).c_str(), &hints, &found);
      rc != 0 || found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve the endpoint listener ", link.connect_host, ": ",
                                               ::gai_strerror(rc)));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the endpoint listener at ", link.connect_host, ":", link.port));
  }
  return fd;
}

// OpenSSL's last error, in words.
std::string TlsError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return std::strerror(errno);
  char text[256];
  ERR_error_string_n(e, text, sizeof text);
  return text;
}

// Waits until `fd` is ready for `events`, or 200 ms passed; false once `stop` is set.
bool WaitFor(int fd, short events, const std::atomic<bool>& stop) {
  if (stop.load()) return false;
  pollfd p{fd, events, 0};
  ::poll(&p, 1, 200);
  return !stop.load();
}

}  // namespace

// TLS over the socket, the socket non-blocking: each OpenSSL call is made under `mu` and
// never blocks (an SSL object is not for two threads at once), and a thread that must wait
// polls the socket without it.
struct ListenerConn::Tls {
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  std::mutex mu;
  std::atomic<bool> stopped{false};
  ~Tls() {
    if (ssl != nullptr) SSL_free(ssl);
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }
};

ListenerConn::ListenerConn(int fd) : fd_(fd) {}

ListenerConn::~ListenerConn() {
  tls_.reset();
  ::close(fd_);
}

absl::StatusOr<std::unique_ptr<ListenerConn>> ListenerConn::Open(const ListenerLink& link) {
  auto fd = DialSocket(link);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<ListenerConn> conn(new ListenerConn(*fd));
  if (!link.tls) return conn;
  auto tls = std::make_unique<Tls>();
  tls->ctx = SSL_CTX_new(TLS_client_method());
  if (tls->ctx == nullptr) return absl::InternalError(absl::StrCat("TLS: ", TlsError()));
  SSL_CTX_set_min_proto_version(tls->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(tls->ctx, SSL_VERIFY_PEER, nullptr);
  if (link.ca_file.empty() ? SSL_CTX_set_default_verify_paths(tls->ctx) != 1
                           : SSL_CTX_load_verify_locations(tls->ctx, link.ca_file.c_str(), nullptr) != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("TLS: cannot load the CAs", link.ca_file.empty() ? "" : " of " + link.ca_file, ": ", TlsError()));
  }
  tls->ssl = SSL_new(tls->ctx);
  if (tls->ssl == nullptr) return absl::InternalError(absl::StrCat("TLS: ", TlsError()));
  // The certificate must name the link's host (the endpoint's own name, not 127.0.0.1).
  SSL_set_tlsext_host_name(tls->ssl, link.host.c_str());
  SSL_set_hostflags(tls->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (SSL_set1_host(tls->ssl, link.host.c_str()) != 1 || SSL_set_fd(tls->ssl, *fd) != 1) {
    return absl::InternalError(absl::StrCat("TLS: ", TlsError()));
  }
  if (SSL_connect(tls->ssl) != 1) {
    long verified = SSL_get_verify_result(tls->ssl);
    return absl::UnavailableError(absl::StrCat(
        "TLS to the endpoint listener at ", link.host, ":", link.port, " failed: ",
        verified != X509_V_OK ? X509_verify_cert_error_string(verified) : TlsError(),
        link.ca_file.empty() ? " (a private CA? give it with --ca_file or $JCCTL_CA_FILE)" : ""));
  }
  ::fcntl(*fd, F_SETFL, ::fcntl(*fd, F_GETFL) | O_NONBLOCK);
  conn->tls_ = std::move(tls);
  return conn;
}

bool ListenerConn::Send(absl::string_view data) {
  if (!tls_) return SendAll(fd_, data);
  while (!data.empty()) {
    int n = 0, error = 0;
    {
      std::lock_guard<std::mutex> lock(tls_->mu);
      ERR_clear_error();
      n = SSL_write(tls_->ssl, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 20)));
      if (n <= 0) error = SSL_get_error(tls_->ssl, n);
    }
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ) {
      if (!WaitFor(fd_, error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, tls_->stopped)) return false;
    } else {
      return false;
    }
  }
  return true;
}

ssize_t ListenerConn::Receive(char* buf, size_t size) {
  if (!tls_) {
    while (true) {
      ssize_t n = ::recv(fd_, buf, size, 0);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }
  while (true) {
    int n = 0, error = 0;
    {
      std::lock_guard<std::mutex> lock(tls_->mu);
      ERR_clear_error();
      n = SSL_read(tls_->ssl, buf, static_cast<int>(std::min<size_t>(size, 1 << 20)));
      if (n <= 0) error = SSL_get_error(tls_->ssl, n);
    }
    if (n > 0) return n;
    if (error == SSL_ERROR_ZERO_RETURN) return 0;  // the other side's close_notify
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (!WaitFor(fd_, error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, tls_->stopped)) return -1;
      continue;
    }
    // A socket closed without close_notify: its end, as a plain socket's would be.
    return error == SSL_ERROR_SYSCALL && errno == 0 ? 0 : -1;
  }
}

void ListenerConn::CloseWrite() {
  if (tls_) {
    std::lock_guard<std::mutex> lock(tls_->mu);
    SSL_shutdown(tls_->ssl);  // close_notify; the other direction stays open
  }
  ::shutdown(fd_, SHUT_WR);
}

void ListenerConn::Shutdown() {
  if (tls_) tls_->stopped = true;
  ::shutdown(fd_, SHUT_RDWR);
}

namespace {

// `request` on a new connection to the listener: the connection and the answer's head when
// it answered `expected`, else its refusal as a status (the connection closed).
absl::StatusOr<std::pair<std::unique_ptr<ListenerConn>, Answer>> Ask(const ListenerLink& link,
                                                                     const std::string& request, int expected) {
  auto conn = ListenerConn::Open(link);
  if (!conn.ok()) return conn.status();
  if (!(*conn)->Send(request)) return absl::UnavailableError("the endpoint listener closed the connection");
  auto answer = ReadAnswer(**conn);
  if (answer.ok() && answer->code == expected) return std::make_pair(std::move(*conn), std::move(*answer));
  return answer.ok() ? StatusOfAnswer(answer->code, ReadRest(**conn, answer->rest)) : answer.status();
}

}  // namespace

absl::StatusOr<std::string> OpenSession(const ListenerLink& link) {
  auto asked = Ask(link, Request(link, link.target, "", ""), 303);
  if (!asked.ok()) return asked.status();
  for (absl::string_view line : absl::StrSplit(asked->second.head, "\r\n")) {
    if (!absl::StartsWithIgnoreCase(line, "Set-Cookie:")) continue;
    line.remove_prefix(11);
    absl::string_view pair = absl::StripAsciiWhitespace(line.substr(0, line.find(';')));
    if (pair.find('=') != absl::string_view::npos) return std::string(pair);
  }
  return absl::UnavailableError("the endpoint listener opened the link but set no session");
}

absl::StatusOr<std::unique_ptr<ListenerConn>> Switch(const ListenerLink& link, const std::string& target,
                                                     const std::string& upgrade, const std::string& cookie,
                                                     std::string* early) {
  auto asked = Ask(link, Request(link, target, upgrade, cookie), 101);
  if (!asked.ok()) return asked.status();
  if (early != nullptr) *early = std::move(asked->second.rest);
  return std::move(asked->first);
}

void Splice(int local, ListenerConn& listener) {
  // One direction on another thread, one here: each ends with its source and half-closes
  // its destination.
  std::thread up([&] {
    char chunk[64 << 10];
    while (true) {
      ssize_t n = ::recv(local, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!listener.Send(absl::string_view(chunk, static_cast<size_t>(n)))) {
        ::shutdown(local, SHUT_RDWR);  // it is gone: the other direction ends too
        return;
      }
    }
    listener.CloseWrite();
  });
  char chunk[64 << 10];
  while (true) {
    ssize_t n = listener.Receive(chunk, sizeof chunk);
    if (n <= 0) break;
    if (!SendAll(local, absl::string_view(chunk, static_cast<size_t>(n)))) {
      listener.Shutdown();
      break;
    }
  }
  ::shutdown(local, SHUT_WR);
  up.join();
}

}  // namespace jc::jcctl
