#pragma once

// A replica's own word on when it was last used (SPEC A17, idle limits): a GET of the
// `activityPath` its task declares for a port, answered 200 with a JSON object whose
// "last_activity" is an RFC 3339 time — Jupyter's /api/status, which JupyterHub's idle
// culler reads too. Jupyter counts there what a person did (kernels running code, API
// calls), not the polls of an open tab, which a count of requests would take for use.
//
// Asked as HTTP/1.0, so the answer is never chunked and ends when the replica closes.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace jc::southbound {
class Tunnel;
}

namespace jc::endpoints {

// The most of an answer read: a status object is a few hundred bytes.
inline constexpr size_t kMaxActivityAnswer = 64 << 10;

// The request: `host` the endpoint's (as a browser's would be), `token` the job's endpoint
// token (empty: none).
std::string ActivityRequest(absl::string_view host, absl::string_view path, absl::string_view token);

// From a whole answer (head and body): its "last_activity". InvalidArgument for an answer
// that is not 200, not a JSON object, or has no time there.
absl::StatusOr<absl::Time> LastActivityOf(absl::string_view answer);

// Sends ActivityRequest through `tunnel` (connected) and reads the answer until the replica
// closes (at most kMaxActivityAnswer bytes; whoever holds the tunnel cancels it when it
// takes too long).
absl::StatusOr<absl::Time> ProbeActivity(southbound::Tunnel& tunnel, absl::string_view host, absl::string_view path,
                                         absl::string_view token);

}  // namespace jc::endpoints
