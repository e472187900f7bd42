#include "tests/testing/h2_squatter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace jc::testing {
namespace {

constexpr char kClientPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kPrefaceSize = sizeof(kClientPreface) - 1;
constexpr uint8_t kSettings = 0x4, kPing = 0x6, kAck = 0x1;

std::string Frame(uint8_t type, uint8_t flags, const std::string& payload) {
  std::string f;
  f += static_cast<char>((payload.size() >> 16) & 0xff);
  f += static_cast<char>((payload.size() >> 8) & 0xff);
  f += static_cast<char>(payload.size() & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  f.append(4, '\0');  // stream 0
  return f + payload;
}

void SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// One accepted connection: what it sent so far, not yet read as frames.
struct Peer {
  int fd;
  std::string in;
  bool preface_read = false;
};

// Reads whole frames from `p.in`, answering SETTINGS and PINGs; false once the peer is gone.
bool Answer(Peer& p) {
  if (!p.preface_read) {
    if (p.in.size() < kPrefaceSize) return true;
    p.in.erase(0, kPrefaceSize);
    p.preface_read = true;
  }
  while (p.in.size() >= 9) {
    const size_t length = (static_cast<uint8_t>(p.in[0]) << 16) | (static_cast<uint8_t>(p.in[1]) << 8) |
                          static_cast<uint8_t>(p.in[2]);
    if (p.in.size() < 9 + length) return true;
    const uint8_t type = static_cast<uint8_t>(p.in[3]);
    const uint8_t flags = static_cast<uint8_t>(p.in[4]);
    const std::string payload = p.in.substr(9, length);
    p.in.erase(0, 9 + length);
    if (type == kSettings && (flags & kAck) == 0) SendAll(p.fd, Frame(kSettings, kAck, ""));
    if (type == kPing && (flags & kAck) == 0) SendAll(p.fd, Frame(kPing, kAck, payload));
  }
  return true;
}

}  // namespace

H2Squatter::H2Squatter(int port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listen_fd_, 64) != 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    return;
  }
  thread_ = std::thread([this] { Serve(); });
}

H2Squatter::~H2Squatter() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  StopListening();
}

void H2Squatter::StopListening() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!thread_.joinable() || stop_) {
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    return;
  }
  // Closed by Serve between two polls: a socket closed while a poll holds it lives on until
  // the poll returns, and the port is not free before (a server bound there at once failed).
  stop_listening_ = true;
  closed_.wait(lock, [this] { return listen_fd_ < 0; });
}

void H2Squatter::Serve() {
  // SETTINGS_MAX_CONCURRENT_STREAMS (0x3) = 0: the client may open no stream.
  const std::string no_streams = Frame(kSettings, 0, std::string("\x00\x03\x00\x00\x00\x00", 6));
  std::vector<Peer> peers;
  while (!stop_) {
    std::vector<pollfd> fds;
    int listening;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_listening_ && listen_fd_ >= 0) {
        close(listen_fd_);
        listen_fd_ = -1;
        closed_.notify_all();
      }
      listening = listen_fd_;
    }
    if (listening >= 0) fds.push_back({listening, POLLIN, 0});
    for (const Peer& p : peers) fds.push_back({p.fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 100) <= 0) continue;
    size_t i = 0;
    if (listening >= 0) {
      if (fds[0].revents & POLLIN) {
        std::lock_guard<std::mutex> lock(mu_);
        if (listen_fd_ >= 0) {
          int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (fd >= 0) {
            ++accepted_;
            SendAll(fd, no_streams);
            peers.push_back({fd, "", false});
          }
        }
      }
      i = 1;
    }
    std::vector<Peer> kept;
    for (size_t k = 0; k < peers.size(); ++k) {
      Peer& p = peers[k];
      const short revents = i + k < fds.size() && fds[i + k].fd == p.fd ? fds[i + k].revents : 0;
      bool alive = true;
      if (revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t n = recv(p.fd, buf, sizeof(buf), 0);
        if (n <= 0) {
          alive = false;
        } else {
          p.in.append(buf, static_cast<size_t>(n));
          alive = Answer(p);
        }
      }
      if (alive) {
        kept.push_back(std::move(p));
      } else {
        close(p.fd);
      }
    }
    peers = std::move(kept);
  }
  for (const Peer& p : peers) close(p.fd);
}

}  // namespace jc::testing
