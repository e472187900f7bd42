#pragma once

// jcctl's raw connections to the endpoint listener (SPEC A17): for `job exec` (the
// command's exec stream) and `job port-forward` (a port's bytes), a GET that the listener
// answers with "101 Switching Protocols" after its checks, then bytes both ways.

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jc::jcctl {

// Where a link issued by JobService.OpenEndpoint points: the listener to connect to, the
// Host to name and the request target.
struct ListenerLink {
  std::string host_header;   // "job-00000042-0-1.endpoints.localhost:8081"
  std::string host;          // the link's host name, as its certificate must name it
  std::string connect_host;  // what to connect to: the host, or 127.0.0.1 for a *.localhost name
  int port = 80;
  std::string target;        // "/.jointcloud/exec?ticket=..."
  // https: TLS to whatever terminates it in front of the listener (a proxy with the
  // endpoints' certificate), checked against the system's CAs, or `ca_file` when set.
  bool tls = false;
  std::string ca_file;
};

// InvalidArgument for a link that is no http:// or https:// URL. `ca_file`: the CAs an
// https link's certificate is checked against (jcctl's --cacert); empty: the system's.
absl::StatusOr<ListenerLink> ParseLink(const std::string& url, const std::string& ca_file = "");

// A connection to the endpoint listener: a socket, or TLS over one. Send and Receive may
// run on two threads at once; Shutdown from any.
class ListenerConn {
 public:
  ~ListenerConn();
  ListenerConn(const ListenerConn&) = delete;
  ListenerConn& operator=(const ListenerConn&) = delete;

  // Connected (and, for TLS, the certificate checked for the link's host).
  static absl::StatusOr<std::unique_ptr<ListenerConn>> Open(const ListenerLink& link);
  // All of `data`; false once the connection is gone.
  bool Send(absl::string_view data);
  // Up to `size` bytes: how many, 0 at the end, -1 once the connection is broken.
  ssize_t Receive(char* buf, size_t size);
  // Nothing more from this side (TLS: close_notify), the other direction still open.
  void CloseWrite();
  // Both directions end now; a Receive or Send waiting on another thread returns.
  void Shutdown();

 private:
  struct Tls;
  explicit ListenerConn(int fd);
  int fd_;
  std::unique_ptr<Tls> tls_;
};

// A session for a port's link (/.jointcloud/enter?ticket=): "name=value" of the cookie its
// 303 sets.
absl::StatusOr<std::string> OpenSession(const ListenerLink& link);

// GET `target` with `cookie` (may be empty) asking to switch to `upgrade`: the connection
// once the listener answered 101 (`early` gets bytes that came after its head), else the
// listener's refusal as a status (403 PermissionDenied, 409 FailedPrecondition, ...) with
// its message.
absl::StatusOr<std::unique_ptr<ListenerConn>> Switch(const ListenerLink& link, const std::string& target,
                                                     const std::string& upgrade, const std::string& cookie,
                                                     std::string* early);

// Bytes both ways between a local socket and the listener until both directions ended
// (each side's end passed on as a half-close); closes neither.
void Splice(int local, ListenerConn& listener);

}  // namespace jc::jcctl
