// What an agent declares of its host (--resources): sizes and counts, and what no host has.

#include <catch2/catch.hpp>

#include "executor/agent/agent.h"

using namespace jc::nexec;

TEST_CASE("an agent's declared memory is a size or MB, and one no host has is refused with why [B1]", "[B1]") {
  pb::AgentInfo info;
  REQUIRE(ApplyDeclaredResources("cpus=4,mem=64G,swap=1024", &info).ok());
  CHECK(info.cpus() == 4);
  CHECK(info.swap_mb() == 1024);
  CHECK(info.mem_mb() > 60000);
  // Infinity and a huge number were taken as MB: a cast of them to an integer is undefined,
  // and the master's check of rusage[mem] against the largest host meant nothing.
  for (const std::string& mem : {std::string("inf"), std::string("nan")}) {
    pb::AgentInfo other;
    CHECK(ApplyDeclaredResources("mem=" + mem, &other).message() == "--resources mem=" + mem + ": not a finite size");
  }
  for (const std::string& mem : {std::string("1e300"), std::string("2000000000")}) {
    pb::AgentInfo other;
    const absl::Status refused = ApplyDeclaredResources("mem=" + mem, &other);
    INFO(mem);
    CHECK(absl::IsInvalidArgument(refused));
    CHECK(refused.message() == "--resources mem=" + mem + ": more than 1073741824 MB (1 PiB)");
  }
  CHECK(ApplyDeclaredResources("mem=1073741824", &info).ok());
}
