#include "adapters/sdk/tunnel.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "jointcloud/adapter/v1/adapter.grpc.pb.h"  // the frames' serialization

namespace jc::adapter {

namespace pb = ::jointcloud::adapter::v1;

absl::StatusOr<int> DialEndpoint(const std::string& host, int port, absl::Duration deadline) {
  const absl::Time until = absl::Now() + deadline;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::UnavailableError(absl::StrCat("the replica's host ", host, " does not resolve"));
  }
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol);
  int rc = fd < 0 ? -1 : ::connect(fd, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError("no socket for the tunnel");
  bool connected = rc == 0;
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(until - absl::Now()));
    if (::poll(&p, 1, static_cast<int>(ms)) == 1) {
      int error = 0;
      socklen_t len = sizeof(error);
      connected = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
  }
  if (!connected) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("nothing answers on the replica's port ", port, " at ", host));
  }
  // Blocking from here, each direction on a thread of its own, but never for ever: a send
  // the endpoint does not take within 30 s, or 15 minutes without a byte from it, ends the
  // tunnel (a replica that accepts and then neither reads nor writes holds nothing long).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval send_timeout{30, 0}, idle{15 * 60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
  return fd;
}

void PumpTunnel(int fd, grpc::ServerContext* ctx, grpc::ServerReaderWriter<pb::TunnelFrame, pb::TunnelFrame>* stream) {
  // The endpoint took the connection: say so first, before any of its bytes (the caller may
  // try another replica when this never comes).
  pb::TunnelFrame connected;
  connected.set_connected(true);
  if (!stream->Write(connected)) {
    ::close(fd);
    return;
  }
  // The endpoint's bytes into frames, until it closes its side or the socket is shut down.
  std::thread out([fd, stream] {
    std::string buf(kTunnelFrameBytes, '\0');
    while (true) {
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      pb::TunnelFrame frame;
      if (n <= 0) {
        frame.set_close(true);
        stream->Write(frame);
        return;
      }
      frame.set_data(buf.data(), static_cast<size_t>(n));
      if (!stream->Write(frame)) {
        ::shutdown(fd, SHUT_RDWR);  // the caller is gone: the other direction ends too
        return;
      }
    }
  });
  // The caller's frames into the endpoint.
  pb::TunnelFrame frame;
  bool write_open = true;
  while (stream->Read(&frame)) {
    if (!write_open) continue;
    const std::string& data = frame.data();
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    if (sent < data.size()) {
      write_open = false;
      ::shutdown(fd, SHUT_RDWR);
    } else if (frame.close()) {
      write_open = false;
      ::shutdown(fd, SHUT_WR);  // the endpoint sees the end of the request; its answer still comes
    }
  }
  // The caller sends no more. Cancelled (or gone): both directions end now. Half-closed: the
  // endpoint sees the end of what was sent, and its answer still comes back.
  ::shutdown(fd, ctx->IsCancelled() ? SHUT_RDWR : SHUT_WR);
  out.join();
  ::close(fd);
}

}  // namespace jc::adapter
