#include "services/server/modules.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jc::server {

const std::vector<ModuleSpec>& Modules() {
  static const auto* modules = new std::vector<ModuleSpec>{
      {"identity", {}, {}, "users, projects, tokens"},
      {"registry", {}, {}, "centers and their health"},
      {"catalog", {}, {"registry"}, "checks the centers specs and images name"},
      {"datamon", {}, {"registry"}, "plans data movement between centers"},
      {"monitor", {}, {"registry"}, "polls the centers' adapters"},
      // Reads the registry, catalog and datamon (over gRPC) and the monitor's latest
      // figures (in process when it runs here; without it the scheduler sees no usage).
      {"scheduler", {}, {"registry", "catalog", "datamon"}, "places jobs from the centers, specs and data"},
      // Places through the scheduler's in-memory snapshot: no query on a decision (ADR 0011).
      {"jobs", {"scheduler"}, {"registry", "datamon", "catalog"},
       "places jobs with the scheduler, stages data through datamon and records staged images in the catalog"},
      {"gateway", {}, {"identity", "registry", "catalog", "datamon", "monitor", "scheduler", "jobs"},
       "serves every REST route"},
  };
  return *modules;
}

absl::Status CheckModules(const std::set<std::string>& services, const std::map<std::string, std::string>& addresses,
                          const std::string& upstream) {
  for (const ModuleSpec& m : Modules()) {
    if (services.count(m.name) == 0) continue;
    for (const std::string& need : m.in_process) {
      if (services.count(need) == 0) {
        return absl::InvalidArgumentError(absl::StrCat("the ", m.name, " service ", m.why, ": it needs the ", need,
                                                       " service in the same process; run both here (--services=",
                                                       absl::StrJoin(services, ","), ",", need, ")"));
      }
    }
    for (const std::string& call : m.calls) {
      if (services.count(call) > 0) continue;
      auto address = addresses.find(call);
      if ((address != addresses.end() && !address->second.empty()) || !upstream.empty()) continue;
      return absl::InvalidArgumentError(absl::StrCat("the ", m.name, " service ", m.why, ": run the ", call,
                                                     " service here (--services), or give --", call,
                                                     "_address or --upstream_address"));
    }
  }
  return absl::OkStatus();
}

}  // namespace jc::server
