#pragma once

// Synthetic traces shaped like the published GPU-cluster ones (Philly, Alibaba PAI):
// heavy-tailed durations (log-normal), GPU counts in powers of two with most jobs on one
// GPU, arrivals following a day's rhythm, a few heavy projects and many light ones. The
// load knob sets the offered work against the federation's capacity; the seed makes
// every trace reproducible.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tools/sim/federation.h"
#include "tools/sim/trace.h"

namespace jc::sim {

struct GeneratorOptions {
  int jobs = 1000;
  // Offered GPU work per second over the federation's capacity in reference-GPU seconds
  // per second (a faster GPU counts its performance). 0.8: 80% offered load.
  double load = 0.8;
  uint64_t seed = 1;
  int projects = 8;
  double median_duration_s = 900;  // log-normal median
  double duration_sigma = 1.6;     // log-normal shape: the tail
  double max_duration_s = 86400;   // the tail's cap
  double diurnal_amplitude = 0.5;  // arrival rate swings by +-50% over a day
  double constrained_share = 0.2;  // jobs that name a GPU model
  double deadline_share = 0.2;     // jobs with a deadline
  double cpu_only_share = 0.05;
  // Jobs reading a dataset, from a pool of `datasets` datasets placed at one or two
  // centers each (added to the federation).
  double dataset_share = 0.3;
  int datasets = 12;
  // Recurring jobs (the Philly and PAI analyses: most jobs are reruns of a few per user):
  // this share of jobs runs one of its user's `names_per_user` named jobs, each with its own
  // median duration (drawn as any job's) and a spread of `recurring_sigma` around it; the
  // rest are one-offs with names of their own. 0: no names, the traces of before.
  double recurring_share = 0;
  int names_per_user = 6;
  double recurring_sigma = 0.25;
  // A named shape (trace_shapes.h: "philly", "pai"): durations, arrivals and users as the
  // published traces have them, in place of the log-normal durations and Poisson arrivals
  // above. Empty: the synthetic trace of before, draw for draw.
  std::string shape;
};

// Generates the trace and adds the datasets it reads to `federation`. InvalidArgument for
// options out of range (a load <= 0, no jobs, a federation without GPUs).
absl::StatusOr<std::vector<TraceJob>> GenerateTrace(const GeneratorOptions& options, Federation& federation);

// The pieces every generated trace shares (the named shapes draw with them too).

// The federation's GPUs as the generator sees them: reference-GPU seconds per second, the
// largest center, the models present.
struct GeneratorCapacity {
  double capacity = 0;
  double largest = 0;
  std::vector<std::string> models;
};
GeneratorCapacity CapacityOf(const Federation& federation);

// The dataset pool (options.datasets of them, each at one or two centers, added to the
// federation); empty when the options ask for none.
std::vector<std::string> AddDatasetPool(const GeneratorOptions& options, Federation& federation, std::mt19937_64& rng);

// A job's resources: CPU-only with options.cpu_only_share, else a power-of-two GPU count
// (most jobs on one GPU), 6 CPUs and 48 GB per GPU, a GPU model with
// options.constrained_share.
void DrawResources(const GeneratorOptions& options, const GeneratorCapacity& capacity, std::mt19937_64& rng,
                   TraceJob& job);

// A dataset from the pool with options.dataset_share.
void DrawDataset(const GeneratorOptions& options, const std::vector<std::string>& pool, const Federation& federation,
                 std::mt19937_64& rng, TraceJob& job);

}  // namespace jc::sim
