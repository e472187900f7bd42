// The REST server's listen backlog: cpp-httplib's 5 made a burst of clients wait a second
// for SYN retransmissions (seen as 1 s outliers in the trainjob benchmark).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/listen_backlog.h"

namespace {

// A loopback socket listening with httplib's backlog, never accepting.
int ListenWithSmallBacklog(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(fd, 5) == 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

// Connects `n` clients at once and counts the connections the kernel queued for accept.
int QueuedConnections(int listener, int port, int n) {
  std::vector<int> clients;
  for (int i = 0; i < n; ++i) {
    int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    clients.push_back(c);
  }
  // Loopback handshakes complete within microseconds; accept what has arrived, with a
  // deadline rather than a fixed wait.
  fcntl(listener, F_SETFL, O_NONBLOCK);
  int accepted = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (accepted < n && std::chrono::steady_clock::now() < deadline) {
    int a = accept(listener, nullptr, nullptr);
    if (a >= 0) {
      ++accepted;
      close(a);
    } else {
      std::this_thread::yield();
    }
  }
  for (int c : clients) close(c);
  return accepted;
}

}  // namespace

TEST_CASE("a listening socket's backlog is raised, so a burst of clients is queued at once", "[A12]") {
  int port = 0;
  int fd = ListenWithSmallBacklog(&port);
  REQUIRE(jc::RaiseListenBacklog(port, 256).ok());
  CHECK(QueuedConnections(fd, port, 64) == 64);
  close(fd);
}

TEST_CASE("without the raise, the same burst overflows a backlog of 5", "[A12]") {
  int port = 0;
  int fd = ListenWithSmallBacklog(&port);
  CHECK(QueuedConnections(fd, port, 64) < 64);
  close(fd);
}

TEST_CASE("raising the backlog of a port nobody listens on says so", "[A12]") {
  int port = 0;
  int fd = ListenWithSmallBacklog(&port);
  close(fd);
  auto s = jc::RaiseListenBacklog(port, 256);
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK(s.message().find(std::to_string(port)) != std::string::npos);
}
