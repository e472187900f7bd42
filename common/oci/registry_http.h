#pragma once

// How the control plane's registry client speaks HTTP (issue 44 holes 6, 7 and 13): a
// registry is trusted to say what an image is, never with the control plane's threads,
// memory or credentials beyond that. So:
// - every request of one call shares one deadline and the caller's cancellation: a
//   watchdog shuts the connection down when either passes, whatever the connection is
//   doing (connecting, the TLS handshake, a header or a body dripping a byte at a time);
// - redirects are followed by hand, a few at most: the credentials go only to the
//   registry's own origin (scheme, host and port), and a redirect to plain http:// is
//   refused — the client never speaks plain HTTP;
// - no answer is read past a size limit: the body is taken in pieces and the read stops
//   at the limit, so a 1 GiB manifest costs the limit, not a gibibyte;
// - a registry that cannot be reached is one error, whatever the reason (closed,
//   filtered, not TLS, an untrusted certificate): the client is not a port scanner for
//   whoever registers an image. The reason goes to the server's log.

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/oci/origin.h"

namespace jc::oci {

// Whether the caller has given up (its RPC was cancelled, the server is stopping). Polled
// by the watchdog, from its own thread, a few times a second.
using Cancelled = std::function<bool()>;

// One call to a registry (one Resolve): its deadline, the caller's cancellation, and the
// watchdog that enforces both on the connection in use.
class RegistryCall {
 public:
  RegistryCall(absl::Duration timeout, Cancelled cancelled);
  ~RegistryCall();
  RegistryCall(const RegistryCall&) = delete;
  RegistryCall& operator=(const RegistryCall&) = delete;

  // OK while the call may go on; DeadlineExceeded or Cancelled once it may not.
  absl::Status Stopped();
  absl::Duration Remaining() const { return deadline_ - absl::Now(); }
  absl::Duration timeout() const { return timeout_; }

  // The socket of the request under way (called from the HTTP client's socket-options hook,
  // before it connects). The call keeps its own duplicate, so the watchdog never shuts down
  // a descriptor number the client has closed and something else reuses.
  void Attach(int fd);
  // The request is over: its socket is the watchdog's no more.
  void Detach();

 private:
  void Watch();

  const absl::Duration timeout_;
  const absl::Time deadline_;
  const Cancelled cancelled_;
  absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;  // our duplicate of the socket in use
  absl::Status stopped_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

struct FetchOptions {
  std::string ca_file;          // CAs trusted besides the system's
  size_t max_body = 4 << 20;    // bytes read of any answer
  int max_redirects = 5;
};

struct HttpAnswer {
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string Header(absl::string_view name) const;          // the first, "" when absent
};

// GETs https://`origin``path` within `call`, following redirects by hand. `headers` go on
// every hop; `authorization` (the Authorization header's value, may be empty) only on hops
// to `origin` itself. `registry` names the registry in errors, `what` what is fetched.
// Errors: DeadlineExceeded/Cancelled (the call stopped), Unavailable (cannot reach, or a
// transport failure), PermissionDenied (a redirect to plain http://), FailedPrecondition
// (an answer past max_body), DataLoss (a redirect without a usable Location, too many).
absl::StatusOr<HttpAnswer> Fetch(RegistryCall& call, const FetchOptions& options, const Origin& origin,
                                 const std::string& path, const std::vector<std::pair<std::string, std::string>>& headers,
                                 const std::string& authorization, absl::string_view registry, absl::string_view what);

}  // namespace jc::oci
