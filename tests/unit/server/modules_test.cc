// Which services may share one jointcloud process (services/server/modules.h, ADR 0011).
#include "services/server/modules.h"

#include <catch2/catch.hpp>

namespace jc::server {
namespace {

TEST_CASE("every service alone or all together is a valid process, and every row names known services [C3]") {
  std::set<std::string> all;
  for (const auto& m : Modules()) all.insert(m.name);
  CHECK(CheckModules(all, {}, "").ok());
  for (const auto& m : Modules()) {
    for (const auto& need : m.in_process) CHECK(all.count(need) == 1);
    for (const auto& call : m.calls) CHECK(all.count(call) == 1);
    // A service alone runs when the ones it calls are reachable somewhere.
    std::set<std::string> alone{m.name};
    for (const auto& need : m.in_process) alone.insert(need);
    INFO(m.name);
    CHECK(CheckModules(alone, {}, "10.0.0.1:50051").ok());
  }
}

TEST_CASE("the job manager needs the scheduler in its own process, and a service that calls another needs it here "
          "or its address [C3]") {
  auto jobs_alone = CheckModules({"jobs"}, {}, "10.0.0.1:50051");
  CHECK(absl::IsInvalidArgument(jobs_alone));
  CHECK(jobs_alone.message().find("needs the scheduler service in the same process") != std::string::npos);
  auto no_registry = CheckModules({"catalog"}, {}, "");
  CHECK(no_registry.message() ==
        "the catalog service checks the centers specs and images name: run the registry service here (--services), "
        "or give --registry_address or --upstream_address");
  CHECK(CheckModules({"catalog"}, {{"registry", "10.0.0.2:50051"}}, "").ok());
  auto gateway = CheckModules({"gateway"}, {{"registry", "r:1"}}, "");
  CHECK(gateway.message().find("give --identity_address") != std::string::npos);
  CHECK(CheckModules({"gateway"}, {}, "up:50051").ok());
}

}  // namespace
}  // namespace jc::server
