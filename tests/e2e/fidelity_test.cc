// jc-sim against reality, short (issue 13 item 10): a dozen jobs run on three real centers
// and in the simulator; both must complete every job, and the difference is printed (the
// figure itself is a benchmark: tests/bench/fidelity_bench, docs/placement-quality.md).

#include <catch2/catch.hpp>

#include <filesystem>
#include <iostream>

#include "tests/testing/fidelity.h"

TEST_CASE("jc-sim and a real run of the same trace both complete, and their completion times are compared [A15]",
          "[A15]") {
  std::string dir = (std::filesystem::temp_directory_path() / "jc-fidelity-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  jc::testing::FidelityOptions o;
  o.server_binary = JC_SERVER_BINARY;
  o.adapter_binary = JC_ADAPTER_LOCAL;
  o.work_dir = dir;
  o.jobs = 12;
  o.min_duration_s = 1;
  o.max_duration_s = 3;
  auto r = jc::testing::RunFidelity(o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  std::cout << jc::testing::FidelityReport(*r);
  CHECK(r->real_completed == 12);
  CHECK(r->sim_completed == 12);
  // Sanity, not the target: a job cannot end before it ran, in either.
  for (const auto& j : r->jobs) {
    CHECK(j.real_jct_s >= j.duration_s - 1e-6);
    CHECK(j.sim_jct_s >= j.duration_s - 1e-6);
  }
  if (r->real_completed == 12) std::filesystem::remove_all(dir);
}
