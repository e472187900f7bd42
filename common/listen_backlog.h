#pragma once

// Debian's cpp-httplib is a compiled library whose listening sockets have a backlog of 5
// (CPPHTTPLIB_LISTEN_BACKLOG, fixed when the library was built). Sixteen clients
// connecting at once then lose SYNs and wait a second for the retransmission. Linux lets a
// second listen() on the socket raise the backlog; this finds the socket by its port.

#include "absl/status/status.h"

namespace jc {

// Sets the backlog of this process's listening TCP socket bound to `port`.
absl::Status RaiseListenBacklog(int port, int backlog);

}  // namespace jc
