#pragma once

// The fidelity check of jc-sim (issue 13 item 10): one small trace runs for real — the
// jointcloud server and three local centers of 2, 4 and 8 CPUs as processes on this
// machine, jobs submitted over REST at their trace times and running `sleep` for their
// durations — and in jc-sim over the same three centers; the per-job completion times
// are compared. Used by the short e2e test and by tests/bench/fidelity_bench.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::testing {

struct FidelityOptions {
  std::string server_binary, adapter_binary;
  std::string work_dir;  // logs and state go here
  int jobs = 12;
  double load = 0.9;  // offered CPU load over the 14 CPUs
  double min_duration_s = 1, max_duration_s = 4;
  uint64_t seed = 1;
  std::string policy = "profile:default";
};

struct FidelityJob {
  double submit_s = 0, duration_s = 0;
  std::string real_center, sim_center;
  double real_jct_s = -1, sim_jct_s = -1;  // < 0: did not complete
};

struct FidelityResult {
  std::vector<FidelityJob> jobs;
  int real_completed = 0, sim_completed = 0;
  double mean_abs_relative_diff = 0;  // over jobs completed in both: |sim - real| / real
  double mean_real_jct_s = 0, mean_sim_jct_s = 0;
  double same_center_share = 0;
};

absl::StatusOr<FidelityResult> RunFidelity(const FidelityOptions& options);

// A table of the jobs and the summary, for a person.
std::string FidelityReport(const FidelityResult& result);

}  // namespace jc::testing
