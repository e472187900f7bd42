#pragma once

// The figures a run is judged by (issue 13 item 3), from the jobs' records.

#include <vector>

#include "tools/sim/simulator.h"

namespace jc::sim {

// JCT = end - submit of completed jobs; wait = first start - submit of jobs that ran;
// makespan = last end - first submit; Jain's index over the projects' mean slowdown (JCT
// over the job's reference duration): 1 when every project is slowed alike, 1/n when one
// project takes all the delay; and the same over the users' (a user is named within its
// project). Utilisation is filled in by the simulator.
RunMetrics ComputeMetrics(const std::vector<JobRecord>& jobs, const std::vector<const TraceJob*>& traces);

// The p-quantile (0..1) of `values` by linear interpolation; 0 when empty. Sorts.
double Quantile(std::vector<double>& values, double p);

// A job's bounded slowdown: max(1, jct / max(duration, bound)), `bound` 10 s by default
// (Feitelson, Rudolph, Schwiegelshohn, Sevcik and Wong, "Theory and practice in parallel
// job scheduling", 1997): jobs shorter than the bound are slowed as if they took it.
double BoundedSlowdown(double jct, double duration, double bound = 10);

// Jain's fairness index of `x`: (sum x)^2 / (n sum x^2); 1 when empty.
double JainIndex(const std::vector<double>& x);

}  // namespace jc::sim
