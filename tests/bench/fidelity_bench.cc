// jc-sim's fidelity (issue 13 item 10): the same trace run for real (three local centers
// of 2, 4 and 8 CPUs behind the jointcloud server) and in jc-sim; prints every job's
// completion time in both and the mean difference (target: within 10% on average).
// usage: fidelity_bench [jobs=60] [load=0.9] [seed=1] [min_duration_s=2] [max_duration_s=6]

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "tests/testing/fidelity.h"

int main(int argc, char** argv) {
  jc::testing::FidelityOptions o;
  o.server_binary = JC_SERVER_BINARY;
  o.adapter_binary = JC_ADAPTER_LOCAL;
  o.jobs = argc > 1 ? std::atoi(argv[1]) : 60;
  o.load = argc > 2 ? std::atof(argv[2]) : 0.9;
  o.seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  o.min_duration_s = argc > 4 ? std::atof(argv[4]) : 2;
  o.max_duration_s = argc > 5 ? std::atof(argv[5]) : 6;
  std::string dir = (std::filesystem::temp_directory_path() / "jc-fidelity-bench-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return 1;
  o.work_dir = dir;
  auto r = jc::testing::RunFidelity(o);
  if (!r.ok()) {
    std::cerr << "fidelity_bench: " << r.status() << " (logs in " << dir << ")\n";
    return 1;
  }
  std::cout << jc::testing::FidelityReport(*r);
  std::filesystem::remove_all(dir);
  return 0;
}
