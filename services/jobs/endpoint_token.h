#pragma once

// The token the endpoint listener proves itself with to one port of one replica's attempt
// (SPEC A17): HMAC-SHA256 under the job's secret (JobRecord.endpoint_token, which no replica
// is given) of the job, task, replica, attempt and port. One per port and attempt, so that
// a process that takes a port the replica left unbound (or reads one replica's environment)
// learns that port's token alone, and a new attempt has new ones.

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace jc::jobs {

// base64url, 43 characters; empty when `secret` is (a job created before tokens).
std::string EndpointToken(absl::string_view secret, absl::string_view job_id, int task_index, int replica_index,
                          int64_t attempt, absl::string_view port_name);

// "JC_ENDPOINT_TOKEN_<NAME>" (upper case, '-' as '_'): the replica's environment variable
// for the port's token. JC_ENDPOINT_TOKEN holds the first port's.
std::string EndpointTokenEnvName(absl::string_view port_name);

}  // namespace jc::jobs
