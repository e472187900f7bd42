#include "tests/testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace jc::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace

TcpProxy::TcpProxy(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = Loopback(0);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(listen_fd_, 64) != 0) {
    throw std::runtime_error("tcp proxy: cannot listen");
  }
  socklen_t len = sizeof(a);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  acceptor_.join();
  std::vector<std::thread> pumps;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pumps.swap(pumps_);
  }
  for (auto& t : pumps) t.join();
  for (int fd : fds_) close(fd);
  close(listen_fd_);
}

void TcpProxy::SetMode(Mode mode, std::chrono::milliseconds delay) {
  delay_ms_ = delay.count();
  mode_ = mode;
}

void TcpProxy::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    int client = accept(listen_fd_, nullptr, nullptr);
    if (client < 0) continue;
    int upstream = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = Loopback(upstream_port_);
    if (connect(upstream, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(client);  // the server is down: the client sees the connection refused
      close(upstream);
      continue;
    }
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard<std::mutex> lock(mu_);
    fds_.push_back(client);
    fds_.push_back(upstream);
    pumps_.emplace_back([this, client, upstream] { Pump(client, upstream); });
    pumps_.emplace_back([this, client, upstream] { Pump(upstream, client); });
  }
}

void TcpProxy::Pump(int from, int to) {
  char buf[16384];
  while (!stopping_) {
    if (mode_ == Mode::kBlackhole) {
      // Nothing is read, so nothing arrives; the sender's buffers fill as on a dead link.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    pollfd p{from, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t n = read(from, buf, sizeof(buf));
    if (n <= 0) break;
    if (mode_ == Mode::kDelay) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
    for (ssize_t off = 0; off < n;) {
      ssize_t w = send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
      if (w <= 0) {
        n = -1;
        break;
      }
      off += w;
    }
    if (n < 0) break;
  }
  // One side closed: so does the other (the fds are closed with the proxy).
  shutdown(from, SHUT_RDWR);
  shutdown(to, SHUT_RDWR);
}

}  // namespace jc::testing
