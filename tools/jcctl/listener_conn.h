#pragma once

// jcctl's raw connections to the endpoint listener (SPEC A17): for `job exec` (the
// command's exec stream) and `job port-forward` (a port's bytes), a GET that the listener
// answers with "101 Switching Protocols" after its checks, then bytes both ways.

#include <string>

#include "absl/status/statusor.h"

namespace jc::jcctl {

// Where a link issued by JobService.OpenEndpoint points: the listener to connect to, the
// Host to name and the request target.
struct ListenerLink {
  std::string host_header;   // "job-00000042-0-1.endpoints.localhost:8081"
  std::string connect_host;  // what to connect to: the host, or 127.0.0.1 for a *.localhost name
  int port = 80;
  std::string target;        // "/.jointcloud/exec?ticket=..."
};

// Unimplemented for an https:// link (a TLS proxy in front of the listener: not yet),
// InvalidArgument for one that is no http:// URL.
absl::StatusOr<ListenerLink> ParseLink(const std::string& url);

// A connected socket to the link's listener.
absl::StatusOr<int> Dial(const ListenerLink& link);

// A session for a port's link (/.jointcloud/enter?ticket=): "name=value" of the cookie its
// 303 sets.
absl::StatusOr<std::string> OpenSession(const ListenerLink& link);

// GET `target` with `cookie` (may be empty) asking to switch to `upgrade`: the socket once
// the listener answered 101 (`early` gets bytes that came after its head), else the
// listener's refusal as a status (403 PermissionDenied, 409 FailedPrecondition, ...) with
// its message.
absl::StatusOr<int> Switch(const ListenerLink& link, const std::string& target, const std::string& upgrade,
                           const std::string& cookie, std::string* early);

// Bytes both ways between two sockets until both directions ended (each side's end passed
// on as a half-close); closes neither.
void Splice(int a, int b);

}  // namespace jc::jcctl
