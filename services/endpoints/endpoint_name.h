#pragma once

// How endpoints are named on the endpoint listener (SPEC A17): each is its own origin, the
// host "<job>-<task>-<replica>-<port>.<domain>" for one replica's port (say
// "job-00000042-0-1-jupyter.endpoints.example.com") and "<job>-<task>-<port>.<domain>" for
// the task's (each connection to one of its ready replicas), so that a page one endpoint
// serves can neither read the console's origin nor another endpoint's. Job ids ("job-" and
// digits), indexes and port names ([a-z][a-z0-9-]*, a letter first) keep the label within
// DNS's 63 characters and lower case, and it reads back unambiguously.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace jc::endpoints {

// A replica index that stands for the task's endpoint.
inline constexpr int kTaskEndpoint = -1;

struct EndpointKey {
  std::string job_id;
  int task_index = 0;
  int replica_index = 0;  // kTaskEndpoint: the task's
  std::string port_name;
  bool operator==(const EndpointKey& o) const {
    return job_id == o.job_id && task_index == o.task_index && replica_index == o.replica_index &&
           port_name == o.port_name;
  }
};

// "job-00000042-0-1-jupyter" ("job-00000042-0-jupyter" for the task's endpoint, and
// "job-00000042-0-1" for commands run in the replica: `jcctl job exec`, a key with no port
// name); empty when the key cannot be named (a job id not of the form "job-<digits>", a port
// name outside [a-z][a-z0-9-]{0,14}).
std::string HostLabel(const EndpointKey& key);
std::optional<EndpointKey> ParseHostLabel(absl::string_view label);

// The endpoint a request's Host header names under `domain` ("<label>.<domain>[:port]",
// any case); nullopt for any other host.
std::optional<EndpointKey> EndpointOfHost(absl::string_view host_header, absl::string_view domain);

// "job-00000042, task 0, replica 1, port \"jupyter\"" (messages; "every ready replica" for
// the task's endpoint).
std::string Describe(const EndpointKey& key);

}  // namespace jc::endpoints
