#include "adapters/sdk/readiness.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace jc::adapter {
namespace {

// Waits for `events` on `fd` until `until`; false at the deadline or on an error.
bool WaitFor(int fd, short events, absl::Time until) {
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(until - absl::Now());
    if (ms <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(ms));
    if (n > 0) return (p.revents & events) != 0;
    if (n == 0 || errno != EINTR) return false;
  }
}

}  // namespace

bool EndpointReady(const std::string& host, int port, const std::string& path, absl::Duration deadline) {
  const absl::Time until = absl::Now() + deadline;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) return false;
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol);
  bool ready = false;
  if (fd >= 0) {
    int rc = ::connect(fd, found->ai_addr, found->ai_addrlen);
    bool connected = rc == 0;
    if (rc != 0 && errno == EINPROGRESS && WaitFor(fd, POLLOUT, until)) {
      int error = 0;
      socklen_t len = sizeof(error);
      connected = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
    if (connected && path.empty()) {
      ready = true;
    } else if (connected) {
      const std::string request =
          absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, ":", port, "\r\nConnection: close\r\n\r\n");
      size_t sent = 0;
      while (sent < request.size() && WaitFor(fd, POLLOUT, until)) {
        const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      // "HTTP/1.1 204 ..." : the status line's first 12 bytes say it.
      std::string head;
      char buf[64];
      while (sent == request.size() && head.size() < 12 && WaitFor(fd, POLLIN, until)) {
        const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        head.append(buf, static_cast<size_t>(n));
      }
      ready = head.size() >= 12 && absl::StartsWith(head, "HTTP/1.") && head[8] == ' ' && head[9] == '2';
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return ready;
}

}  // namespace jc::adapter
