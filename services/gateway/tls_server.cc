#include "services/gateway/tls_server.h"

#include "common/auth/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cstring>

namespace jc::gateway {
namespace {

constexpr size_t kRecord = 16 * 1024;  // a TLS record's most plaintext

// `stop_fd` (or -1): readable once the server stops; a wait for input ends then, so a
// client holding half a request keeps no thread past the stop (attacker helper-71,
// finding 3: a stop waited out every such client's read timeout).
bool WaitFor(int fd, short events, time_t sec, time_t usec, int stop_fd = -1) {
  pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
  int ms = static_cast<int>(sec * 1000 + usec / 1000);
  int n;
  do {
    n = ::poll(p, stop_fd >= 0 ? 2 : 1, ms);
  } while (n < 0 && errno == EINTR);
  if (n > 0 && stop_fd >= 0 && p[1].revents != 0) return false;
  return n > 0 && (p[0].revents & (events | POLLHUP | POLLERR)) != 0;
}

using Clock = std::chrono::steady_clock;

Clock::time_point After(time_t sec, time_t usec) {
  return Clock::now() + std::chrono::seconds(sec) + std::chrono::microseconds(usec);
}

// After an SSL call on the non-blocking socket returned `rc`: waits until the socket can do
// what OpenSSL asked for (read or write), no later than `deadline`. False: it cannot go on
// (an error, the peer gone, or the deadline passed).
// Waits for input end when `stop_fd` turns readable; waits to write do not (an answer
// under way still goes out).
bool WaitForSsl(int fd, SSL* ssl, int rc, Clock::time_point deadline, int stop_fd = -1) {
  int err = SSL_get_error(ssl, rc);
  short events = err == SSL_ERROR_WANT_READ ? POLLIN : err == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
  if (events == 0) return false;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return false;
  return WaitFor(fd, events, static_cast<time_t>(left / 1000), static_cast<time_t>((left % 1000) * 1000),
                 events == POLLIN ? stop_fd : -1);
}

void Address(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    port = ntohs(in6->sin6_port);
  }
  ip = text;
}

// One connection's TLS as httplib's Stream, buffered both ways as the header explains.
class BufferedTlsStream final : public httplib::Stream {
 public:
  BufferedTlsStream(int fd, SSL* ssl, time_t read_sec, time_t read_usec, time_t write_sec, time_t write_usec,
                    int stop_fd)
      : fd_(fd),
        ssl_(ssl),
        read_sec_(read_sec),
        read_usec_(read_usec),
        write_sec_(write_sec),
        write_usec_(write_usec),
        stop_fd_(stop_fd) {}

  // Data already here (a pipelined request), or the socket turns readable in `sec`. With
  // read-ahead OpenSSL may hold a next record's bytes not yet decrypted, which SSL_pending
  // does not count and the socket no longer shows: SSL_has_pending does.
  bool HasInput(time_t sec, time_t usec) const { return Buffered() || WaitFor(fd_, POLLIN, sec, usec, stop_fd_); }
  bool Buffered() const { return begin_ < end_ || SSL_has_pending(ssl_) == 1; }

  bool is_readable() const override { return HasInput(read_sec_, read_usec_); }
  bool is_writable() const override { return WaitFor(fd_, POLLOUT, write_sec_, write_usec_); }

  // A request's bytes (its head and body) must all come within the read timeout of its
  // first: a client that trickles them, a byte per record or a record in pieces, each just
  // inside a read's timeout, would otherwise hold this thread as long as it likes
  // (helper-44, finding 5).
  void StartRequest() { request_deadline_ = After(read_sec_, read_usec_); }
  // Whether a read failed (the peer gone, or the request's deadline passed): httplib answers
  // a request whose head timed out with 400 and would read the next on the same connection,
  // so a client trickling header after header kept its thread a read timeout at a time
  // (attacker helper-71, finding 2). The connection ends instead.
  bool ReadFailed() const { return read_failed_; }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 1 && begin_ < end_ && !holding_) {
      // httplib reads a request's head a byte at a time (its line reader): about 200 calls a
      // request, each served from what is already decrypted.
      *ptr = in_[begin_++];
      return 1;
    }
    if (!Flush()) return -1;
    if (begin_ == end_) {
      // No poll first: a request's bytes are mostly here already (the keep-alive loop saw
      // them arrive), and on the non-blocking socket SSL_read says when it must wait.
      Clock::time_point deadline = std::min(request_deadline_, After(read_sec_, read_usec_));
      int n;
      while ((n = SSL_read(ssl_, in_, static_cast<int>(kRecord))) <= 0) {
        if (SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN) return 0;
        if (!WaitForSsl(fd_, ssl_, n, deadline, stop_fd_)) {
          read_failed_ = true;
          return -1;
        }
      }
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, in_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!holding_) {
      // The first write since the stream last read: a response's head. Held, to go out
      // with what follows it.
      held_.assign(ptr, size);
      holding_ = true;
      return static_cast<ssize_t>(size);
    }
    held_.append(ptr, size);
    return Flush() ? static_cast<ssize_t>(size) : -1;
  }

  // Sends what is held; false when the connection fails.
  bool Flush() {
    if (!holding_) return true;
    holding_ = false;
    size_t done = 0;
    Clock::time_point deadline = After(write_sec_, write_usec_);
    while (done < held_.size()) {
      int chunk = static_cast<int>(std::min(held_.size() - done, kRecord));
      int n = SSL_write(ssl_, held_.data() + done, chunk);
      if (n <= 0) {
        if (WaitForSsl(fd_, ssl_, n, deadline)) continue;  // the same bytes again, as OpenSSL requires
        held_.clear();
        return false;
      }
      done += static_cast<size_t>(n);
      deadline = After(write_sec_, write_usec_);  // progress: a slow reader, not a stalled one
    }
    held_.clear();
    return true;
  }

  // httplib asks both for every request; a connection's ends do not change, so they are
  // asked of the kernel once.
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    if (remote_port_ < 0) Address(fd_, true, remote_ip_, remote_port_);
    ip = remote_ip_;
    port = remote_port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    if (local_port_ < 0) Address(fd_, false, local_ip_, local_port_);
    ip = local_ip_;
    port = local_port_;
  }
  socket_t socket() const override { return fd_; }

 private:
  const int fd_;
  SSL* const ssl_;
  const time_t read_sec_, read_usec_, write_sec_, write_usec_;
  const int stop_fd_;
  char in_[kRecord];
  size_t begin_ = 0, end_ = 0;
  std::string held_;
  bool holding_ = false;
  Clock::time_point request_deadline_ = Clock::time_point::max();
  bool read_failed_ = false;
  mutable std::string remote_ip_, local_ip_;
  mutable int remote_port_ = -1, local_port_ = -1;
};


}  // namespace

namespace {

// The files' modification times and sizes: changes when either is replaced.
std::string Stamp(const std::string& cert, const std::string& key) {
  std::string out;
  for (const std::string* path : {&cert, &key}) {
    struct stat st {};
    if (::stat(path->c_str(), &st) != 0) return "";
    out += std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
           std::to_string(st.st_size) + ";";
  }
  return out;
}

std::shared_ptr<SSL_CTX> MakeContext(const std::string& cert, const std::string& key) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return nullptr;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  // A record's header and body in one read(2), not two: one system call less per request
  // (issue 48; the stream asks SSL_has_pending for what read-ahead keeps).
  SSL_CTX_set_read_ahead(ctx, 1);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return nullptr;
  }
  // Connections hold their own reference (SSL_new), so a replaced context lives on
  // until its last connection ends.
  return std::shared_ptr<SSL_CTX>(ctx, SSL_CTX_free);
}

}  // namespace

TlsServer::TlsServer(const std::string& cert_chain_file, const std::string& private_key_file)
    : cert_file_(cert_chain_file), key_file_(private_key_file) {
  // OpenSSL writes with write(2): a client gone mid-response must be an error on that
  // connection, not SIGPIPE ending the process.
  std::signal(SIGPIPE, SIG_IGN);
  loaded_stamp_ = Stamp(cert_file_, key_file_);
  ctx_ = MakeContext(cert_file_, key_file_);
  next_check_ = std::chrono::steady_clock::now() + std::chrono::seconds(auth::kTlsReloadSeconds);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

TlsServer::~TlsServer() {
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void TlsServer::StopReading() {
  if (stop_fd_ < 0) return;
  const uint64_t one = 1;
  // Never read back: it stays readable, so every wait for input from now on ends at once.
  [[maybe_unused]] ssize_t written = ::write(stop_fd_, &one, sizeof(one));
}

bool TlsServer::is_valid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx_ != nullptr;
}

std::shared_ptr<SSL_CTX> TlsServer::Context() {
  std::lock_guard<std::mutex> lock(mu_);
  auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return ctx_;
  next_check_ = now + std::chrono::seconds(auth::kTlsReloadSeconds);
  std::string stamp = Stamp(cert_file_, key_file_);
  if (stamp.empty() || stamp == loaded_stamp_) return ctx_;
  loaded_stamp_ = stamp;  // tried once per change
  if (auto fresh = MakeContext(cert_file_, key_file_)) {
    ctx_ = std::move(fresh);
    spdlog::info("rest: TLS certificate {} and key {} reloaded", cert_file_, key_file_);
  } else {
    spdlog::error("rest: TLS certificate {} and key {} changed but do not load as a pair; still serving the previous "
                  "ones",
                  cert_file_, key_file_);
  }
  return ctx_;
}

bool TlsServer::process_and_close_socket(socket_t sock) {
  bool ok = false;
  std::shared_ptr<SSL_CTX> ctx = Context();
  SSL* ssl = ctx != nullptr ? SSL_new(ctx.get()) : nullptr;
  if (ssl != nullptr && SSL_set_fd(ssl, sock) == 1) {
    // Non-blocking I/O, each wait a poll with a deadline: a client that stalls or trickles
    // the handshake or a request holds its thread no longer than the read timeout.
    int flags = ::fcntl(sock, F_GETFL, 0);
    bool nonblocking = flags >= 0 && ::fcntl(sock, F_SETFL, flags | O_NONBLOCK) == 0;
    Clock::time_point handshake_deadline = After(read_timeout_sec_, read_timeout_usec_);
    int accepted = 0;
    while (nonblocking && (accepted = SSL_accept(ssl)) != 1 &&
           WaitForSsl(sock, ssl, accepted, handshake_deadline, stop_fd_)) {
    }
    if (nonblocking && accepted == 1) {
      BufferedTlsStream stream(sock, ssl, read_timeout_sec_, read_timeout_usec_, write_timeout_sec_,
                               write_timeout_usec_, stop_fd_);
      // httplib's keep-alive: up to keep_alive_max_count_ requests, each next one awaited
      // for keep_alive_timeout_sec_ in short slices so that stop() is seen.
      for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
        auto idle_until = std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
        bool next = stream.Buffered();
        while (!next && svr_sock_ != INVALID_SOCKET && std::chrono::steady_clock::now() < idle_until) {
          next = stream.HasInput(0, 10000);
        }
        if (!next) break;
        stream.StartRequest();
        bool closed = false;
        ok = process_request(stream, left == 1, closed, [ssl](httplib::Request& req) { req.ssl = ssl; });
        if (!stream.Flush()) ok = false;
        if (!ok || closed || stream.ReadFailed()) break;
      }
      SSL_shutdown(ssl);
    }
  }
  ERR_clear_error();
  if (ssl != nullptr) SSL_free(ssl);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace jc::gateway
