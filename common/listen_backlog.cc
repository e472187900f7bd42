#include "common/listen_backlog.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace jc {

namespace {

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return -1;
}

}  // namespace

absl::Status RaiseListenBacklog(int port, int backlog) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = std::atoi(entry.path().filename().c_str());
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    if (BoundPort(fd) != port) continue;
    if (listen(fd, backlog) != 0) return absl::InternalError(absl::StrCat("listen(", port, "): errno ", errno));
    return absl::OkStatus();
  }
  if (ec) return absl::InternalError(absl::StrCat("/proc/self/fd: ", ec.message()));
  return absl::NotFoundError(absl::StrCat("no listening socket on port ", port));
}

}  // namespace jc
