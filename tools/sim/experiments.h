#pragma once

// What `jc-sim compare`, `sweep` and `tune` run: many simulations of one federation,
// spread over the machine's cores, each deterministic on its own.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/sim/generator.h"
#include "tools/sim/simulator.h"

namespace jc::sim {

// Runs on `threads` threads (0: one per core); results in the order of `runs`.
absl::StatusOr<std::vector<RunResult>> RunAll(const Federation& federation, const std::vector<TraceJob>& trace,
                                              const std::vector<SimOptions>& runs, const PolicyCatalog& catalog,
                                              int threads = 0);

// Mean and the half-width of its 95% confidence interval (Student's t) over seeds.
struct Estimate {
  double mean = 0, ci95 = 0;
  int n = 0;
};
Estimate EstimateOf(const std::vector<double>& samples);

struct SweepOptions {
  std::vector<double> loads = {0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2};
  int seeds = 3;
  GeneratorOptions generator;  // load and seed are set per point
  std::vector<std::string> policies;
  scheduler::QueueSettings queue;
  bool oracle_durations = false;  // SimOptions::oracle_durations
  std::string center_reports = "start";  // SimOptions::center_reports
};

struct SweepPoint {
  std::string policy;
  double load = 0;
  Estimate mean_jct, p95_jct, mean_wait, cost, energy_kwh, utilisation, jain;
  double never_ran = 0;  // mean over seeds
};

// For every load and seed, a generated trace (the same for every policy) and one run per
// policy.
absl::StatusOr<std::vector<SweepPoint>> Sweep(const Federation& federation, const SweepOptions& options,
                                              const PolicyCatalog& catalog, int threads = 0);

struct TuneOptions {
  std::string objective = "mean_jct";  // mean_jct | p95_jct | mean_wait | cost | energy_kwh
  int evaluations = 60;                // simulations of the training trace
  std::vector<double> grid = {0, 0.5, 1, 2, 4};
  uint64_t seed = 1;
  scheduler::QueueSettings queue;
  bool oracle_durations = false;  // SimOptions::oracle_durations
};

struct TuneResult {
  std::map<std::string, double> weights;  // by algorithm id
  double train = 0, holdout = 0;                  // the tuned weights' objective
  double default_train = 0, default_holdout = 0;  // the default profile's
  int evaluated = 0;
};

// The objective of a run; jobs that never completed count as if they had taken the run's
// makespan, so that leaving work undone never looks good. InvalidArgument for an unknown
// objective.
absl::StatusOr<double> Objective(const RunMetrics& m, const std::string& objective);

// Searches weights on `train` (random restarts over the grid, then coordinate descent from
// the best) and reports them on `holdout`, which the search never sees.
absl::StatusOr<TuneResult> Tune(const Federation& federation, const std::vector<TraceJob>& train,
                                const std::vector<TraceJob>& holdout, const TuneOptions& options,
                                const PolicyCatalog& catalog, int threads = 0);

// "weights:id=w,id=w" for a weight map, a policy name MakePolicy reads.
std::string WeightsPolicy(const std::map<std::string, double>& weights);

}  // namespace jc::sim
