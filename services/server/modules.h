#pragma once

// The services one `jointcloud` process may run, as a table (the model: Grafana Mimir's
// modules.go): each row says what the service needs in this same process (it holds a C++
// pointer to it), which services it calls over gRPC (in process when they run here, else at
// --<name>_address or --upstream_address), and how it is made. App::Start walks the table;
// the co-location rules are rows, not if-chains, and CheckModules says which one a
// --services list breaks before anything starts. docs/architecture.md, "Modules and what may
// share a process", is this table in prose.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace jc::server {

struct ModuleSpec {
  std::string name;
  // Must run in this process: it is called through a pointer, not over gRPC (ADR 0011).
  std::vector<std::string> in_process;
  // Called over gRPC: here when it runs here, else at its address.
  std::vector<std::string> calls;
  std::string why;  // what it does with them, for the error that names a missing one
};

// Every module, in start order (a module comes after those it needs). The gateway is the
// last row: it calls every other service, here or at its address.
const std::vector<ModuleSpec>& Modules();

// Whether `services` can run in one process given the addresses of the others
// (`addresses`: service name → --<name>_address; `upstream`: --upstream_address): the
// first rule broken, with what to do about it.
absl::Status CheckModules(const std::set<std::string>& services, const std::map<std::string, std::string>& addresses,
                          const std::string& upstream);

}  // namespace jc::server
