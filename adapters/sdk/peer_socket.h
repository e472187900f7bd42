#pragma once

// The adapter API on a Unix socket, admitting only the accounts allowed to call it
// (issue 29: the adapter API is authenticated on every transport, loopback included).
//
// Plaintext TCP on loopback takes calls from every process of the host — every local
// account, and every replica the center runs there. On a Unix socket the kernel tells
// who connected (SO_PEERCRED): each connection is checked against the allowed accounts
// (the control plane's) before gRPC sees a byte of it, and refused ones are logged with
// their uid and pid. Accepted connections are handed to the gRPC server as they are
// (grpc::AddInsecureChannelFromFd): gRPC never listens itself.

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace grpc {
class Server;
}

namespace jc::adapter {

// "unix:/path" or "unix:///path" -> "/path"; "" for any other address.
std::string UnixSocketPath(const std::string& address);

// Accounts by name or uid, comma-separated ("root,jointcloud,1001"); InvalidArgument
// naming an account this host does not have.
absl::StatusOr<std::set<uid_t>> ParseAllowedPeers(const std::string& list);

class PeerCheckedSocket {
 public:
  // Binds `path` (a stale socket there is replaced; any other file is refused), mode 0666
  // (who may connect is decided by SO_PEERCRED, not by the file), and hands each
  // connection of an `allowed` account to `server`, which must be started.
  static absl::StatusOr<std::unique_ptr<PeerCheckedSocket>> Listen(const std::string& path, std::set<uid_t> allowed,
                                                                  grpc::Server* server);
  ~PeerCheckedSocket();  // stops accepting and removes the socket file
  PeerCheckedSocket(const PeerCheckedSocket&) = delete;
  PeerCheckedSocket& operator=(const PeerCheckedSocket&) = delete;

  int64_t refused() const { return refused_.load(); }

 private:
  PeerCheckedSocket(std::string path, int fd, std::set<uid_t> allowed, grpc::Server* server);
  void AcceptLoop();

  const std::string path_;
  const int fd_;
  const std::set<uid_t> allowed_;
  grpc::Server* const server_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> refused_{0};
  std::thread acceptor_;
};

}  // namespace jc::adapter
