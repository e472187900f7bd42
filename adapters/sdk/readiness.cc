#include "adapters/sdk/readiness.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pwd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

bool ListenerIsAccounts(int port, const std::string& account) {
  uid_t want = ::geteuid();
  if (!account.empty()) {
    passwd pw{};
    passwd* found = nullptr;
    char buf[4096];
    if (::getpwnam_r(account.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) return false;
    want = found->pw_uid;
  }
  // "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid ..."
  std::set<long> owners;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state, queues, timer, retransmits, uid;
      if (!(fields >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid)) continue;
      if (state != "0A") continue;  // LISTEN
      const size_t colon = local.rfind(':');
      int local_port = 0;
      if (colon == std::string::npos || !absl::SimpleHexAtoi(local.substr(colon + 1), &local_port)) continue;
      long owner = -1;
      if (local_port == port && absl::SimpleAtoi(uid, &owner)) owners.insert(owner);
    }
  }
  return !owners.empty() && owners.size() == 1 && *owners.begin() == static_cast<long>(want);
}

}  // namespace jc::adapter
