#pragma once

// All of `data` to a socket, whatever the kernel takes at a time (EINTR retried, never
// SIGPIPE): false once the peer is gone or a send timed out.

#include <sys/socket.h>

#include <cerrno>

#include "absl/strings/string_view.h"

namespace jc {

inline bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace jc
