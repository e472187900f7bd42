#pragma once

// How a replica's endpoint is named on the endpoint listener (SPEC A17): each endpoint is
// its own origin, the host "<job>-<task>-<replica>-<port>.<domain>" (say
// "job-00000042-0-1-jupyter.endpoints.example.com"), so that a page one endpoint serves can
// neither read the console's origin nor another endpoint's. Job ids ("job-" and digits),
// indexes and port names ([a-z][a-z0-9-]*) keep the label within DNS's 63 characters and
// lower case, and it reads back unambiguously (the job id and the two indexes are digits).

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace jc::endpoints {

struct EndpointKey {
  std::string job_id;
  int task_index = 0;
  int replica_index = 0;
  std::string port_name;
  bool operator==(const EndpointKey& o) const {
    return job_id == o.job_id && task_index == o.task_index && replica_index == o.replica_index &&
           port_name == o.port_name;
  }
};

// "job-00000042-0-1-jupyter"; empty when the key cannot be named (a job id not of the
// form "job-<digits>", a port name outside [a-z][a-z0-9-]{0,14}).
std::string HostLabel(const EndpointKey& key);
std::optional<EndpointKey> ParseHostLabel(absl::string_view label);

// The endpoint a request's Host header names under `domain` ("<label>.<domain>[:port]",
// any case); nullopt for any other host.
std::optional<EndpointKey> EndpointOfHost(absl::string_view host_header, absl::string_view domain);

// "job-00000042, task 0, replica 1, port \"jupyter\"" (messages).
std::string Describe(const EndpointKey& key);

}  // namespace jc::endpoints
