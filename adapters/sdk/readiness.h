#pragma once

// Whether a replica's port answers (SPEC A17 readiness), probed by the adapter where it can
// reach the replica's host: a TCP connection within the deadline, or, with a path, an HTTP
// GET of it answered 2xx within the deadline.

#include <string>

#include "absl/time/time.h"

namespace jc::adapter {

bool EndpointReady(const std::string& host, int port, const std::string& path, absl::Duration deadline);

// Whether `host` is this machine's loopback (127.0.0.0/8, ::1, localhost): where the adapter
// can see who listens on a port.
bool IsLoopback(const std::string& host);

// On this machine: whether a socket listening on TCP `port` (any address) belongs to
// `account` ("" : this process's own). False when none listens, or when one of another
// account does: a port of the range is a replica's only while its own account holds it
// (SPEC A17: any tenant's process could bind it first). Read from /proc/net/tcp and tcp6.
bool ListenerIsAccounts(int port, const std::string& account);

}  // namespace jc::adapter
