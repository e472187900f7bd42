#include "adapters/sdk/peer_socket.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace jc::adapter {

std::string UnixSocketPath(const std::string& address) {
  absl::string_view rest = address;
  if (!absl::ConsumePrefix(&rest, "unix:")) return "";
  if (absl::StartsWith(rest, "//")) rest.remove_prefix(2);
  return std::string(rest);
}

absl::StatusOr<std::set<uid_t>> ParseAllowedPeers(const std::string& list) {
  std::set<uid_t> out;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    uint32_t uid = 0;
    if (absl::SimpleAtoi(item, &uid)) {
      out.insert(static_cast<uid_t>(uid));
      continue;
    }
    passwd pw;
    passwd* found = nullptr;
    char buf[16384];
    const std::string name(item);
    if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--allowed_peers: no account \"", name, "\" on this host"));
    }
    out.insert(found->pw_uid);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PeerCheckedSocket>> PeerCheckedSocket::Listen(const std::string& path,
                                                                            std::set<uid_t> allowed,
                                                                            grpc::Server* server) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unix socket path \"", path, "\" is empty or longer than ", sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // A socket left by an earlier run is replaced; a file of any other kind is not ours.
  struct stat st{};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a socket; not replacing it"));
    }
    unlink(path.c_str());
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || chmod(path.c_str(), 0666) != 0 ||
      listen(fd, 128) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on unix:", path, ": ", std::strerror(err)));
  }
  return std::unique_ptr<PeerCheckedSocket>(new PeerCheckedSocket(path, fd, std::move(allowed), server));
}

PeerCheckedSocket::PeerCheckedSocket(std::string path, int fd, std::set<uid_t> allowed, grpc::Server* server)
    : path_(std::move(path)), fd_(fd), allowed_(std::move(allowed)), server_(server) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

PeerCheckedSocket::~PeerCheckedSocket() {
  stopping_ = true;
  acceptor_.join();
  close(fd_);
  unlink(path_.c_str());
}

void PeerCheckedSocket::AcceptLoop() {
  while (!stopping_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;  // woken at least every 100 ms to see a stop
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) continue;
    ucred peer{};
    socklen_t size = sizeof(peer);
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || !allowed_.count(peer.uid)) {
      ++refused_;
      spdlog::warn("adapter: refused a connection on unix:{} from uid {} (pid {}): only the accounts --allowed_peers "
                   "names may call the adapter",
                   path_, peer.uid, peer.pid);
      close(conn);
      continue;
    }
    grpc::AddInsecureChannelFromFd(server_, conn);  // the server owns it from here
  }
}

}  // namespace jc::adapter
