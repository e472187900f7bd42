#pragma once

// Named trace shapes for jc-sim's generator (docs/placement-quality.md, "Trace shapes"):
// durations that reproduce published quantiles of the Philly and Alibaba PAI traces, bursty
// arrivals (users submit jobs in sweeps, so inter-arrival times vary far more than a
// Poisson process's), and a few heavy users holding a stated share of the GPU time.
//
// Where each figure comes from is written beside it in trace_shapes.cc; a figure that no
// source gives is marked as ours.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/sim/federation.h"
#include "tools/sim/generator.h"
#include "tools/sim/trace.h"

namespace jc::sim {

// One point of a duration distribution: `quantile` of the jobs run at most `seconds`.
struct DurationKnot {
  double quantile = 0;
  double seconds = 0;
};

struct TraceShape {
  std::string name;
  std::string source;  // one line: where the durations come from
  // The distribution, as knots increasing in both fields, from quantile 0 to quantile 1;
  // between knots the quantile function is linear in log(seconds).
  std::vector<DurationKnot> durations;
  // The quantiles a generated trace must reproduce (within 20%). A figure not published by
  // the source is the distribution's own and `*_cited` says so.
  double p50_s = 0, p90_s = 0, p99_s = 0;
  bool p50_cited = true, p90_cited = true, p99_cited = true;
  // Users and the heavy few: `heavy_users` of `users` hold `heavy_share` of the GPU time.
  int users = 50;
  int heavy_users = 5;
  double heavy_share = 0.6;
  // Arrivals: jobs come in bursts (a user's sweep) of a geometric size with this mean, the
  // jobs of a burst `burst_gap_s` apart on average; bursts start as a day-modulated Poisson
  // process. With mean size B the inter-arrival coefficient of variation is about
  // sqrt(2B - 1).
  double burst_mean = 6;
  double burst_gap_s = 10;
};

// The shapes jc-sim knows, by name.
const std::vector<TraceShape>& TraceShapes();
// nullptr for an unknown name.
const TraceShape* FindTraceShape(std::string_view name);
// "philly, pai": for messages and --help.
std::string TraceShapeNames();

// The shape's quantile function: the duration (seconds) that a share `u` in [0, 1] of the
// jobs do not exceed.
double DurationQuantile(const TraceShape& shape, double u);

// GenerateTrace for a named shape (GeneratorOptions::shape). The options' duration
// settings (median, sigma, cap) do not apply: the shape's distribution does.
absl::StatusOr<std::vector<TraceJob>> GenerateShapedTrace(const GeneratorOptions& options, const TraceShape& shape,
                                                          Federation& federation);

// What a trace measures against a shape's figures.
struct TraceShapeStats {
  double p50_s = 0, p90_s = 0, p99_s = 0;  // durations of the GPU jobs
  double interarrival_cv = 0;              // of the gaps between consecutive submits
  double top_users_share = 0;              // of the GPU time (GPUs x duration)
  int users = 0;
  double offered_load = 0;  // GPU work over (capacity x the span of the submits)
};

// `top_users`: how many of the heaviest users the share counts; `capacity`: reference-GPU
// seconds per second (0: offered_load is left 0).
TraceShapeStats MeasureTrace(const std::vector<TraceJob>& jobs, int top_users, double capacity);

}  // namespace jc::sim
