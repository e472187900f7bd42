#pragma once

// jc-sim's discrete-event core: replays a trace over a federation on a virtual clock (no
// sleeping), placing jobs with the scheduler's own library — snapshot, filters, scorers,
// normalization, evaluation model (through a PlacementPolicy) and queue order (JobQueue),
// with the retry policy's "avoid where it failed". Reality is modelled: run time scales
// with the center's speed for the job's GPU model; data not at the center moves first
// from the source datamon's selection picks (size / bandwidth plus latency), and stays
// there; cost is price x hours held; energy is formula 1; centers fail and recover on the
// outage schedule, and their jobs are retried elsewhere.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/scheduler/job_queue.h"
#include "tools/sim/federation.h"
#include "tools/sim/policy.h"
#include "tools/sim/trace.h"

namespace jc::sim {

struct SimOptions {
  std::string policy = "profile:default";
  // The queue order (fcfs, fair_share, sef, hrrn, las, and each after fair_share). sef and
  // hrrn rank by the duration estimator (services/estimator), fed only with the jobs that had
  // ended before each pass — never the trace's own durations.
  scheduler::QueueSettings queue;
  // What placement is told of a job's run time (PlacementRequest::expected_runtime, read by
  // the price, energy and deadline scorers): false, what the control plane knows — the
  // estimator's figure for the job's class (DurationEstimate::assumed), learned from the jobs ended so far, else the
  // default hour; true, the trace's own duration (an oracle: an upper bound on what better
  // estimates could win, never a result to report as the scheduler's).
  bool oracle_durations = false;
  // What a center tells placement of its queue, for a policy that may hold a job for a busy
  // center (a profile weighing expected_completion): "start", its own estimate of when a
  // replica of the spec would start (CenterView::reported_start_delay, as nexec's pending
  // jobs or Slurm's `squeue --start` give it: its running jobs' expected ends and the jobs
  // held for it ahead, by the control plane's estimates, never the trace's durations);
  // "counts", only running and waiting counts (the strategy estimates the wait itself).
  std::string center_reports = "start";
  // Centers are kept for waiting jobs that can run at few of them (PlacementRequest::
  // kept_centers), as the control plane keeps them; false: not (measurement only).
  bool keep_scarce = true;
  uint64_t seed = 1;  // the random policy's
  bool keep_jobs = false;  // fill RunResult::jobs
};

// One job's fate.
struct JobRecord {
  double submit = 0;
  double start = -1;  // first placement; < 0: never ran
  double end = -1;    // completion; < 0: did not complete
  std::string center;  // where it completed (or last ran)
  int attempts = 0;
  double transfer_s = 0, run_s = 0;  // of the last attempt
  double cost = 0, energy_j = 0;      // over all attempts
};

struct CenterUse {
  std::string id;
  double gpu_utilisation = 0;  // busy GPU-seconds / (GPUs x seconds), from the first to the last submission
  int jobs = 0;                // attempts started there
};

struct RunMetrics {
  std::string policy, queue;
  int jobs = 0, completed = 0, never_ran = 0, failed = 0;  // failed: retries exhausted
  double mean_jct = 0, median_jct = 0, p95_jct = 0;
  double mean_wait = 0, median_wait = 0, p95_wait = 0;
  double makespan = 0, cost = 0, energy_kwh = 0;
  int deadline_jobs = 0, deadline_misses = 0;
  double jain_fairness = 0;  // over projects' mean slowdown (JCT / reference duration)
  double jain_users = 0;     // the same over users' mean slowdown (issue 45's acceptance)
  // Each user's mean slowdown (by project, user), and the highest of them: Jain's index
  // says how equal the users' slowdowns are, not whether any got worse — a run that halves
  // every user's but one's is less equal and starves nobody. Compared user by user with
  // another run on the same trace, these say who was slowed (placement_quality_bench).
  std::map<std::pair<std::string, std::string>, double> user_slowdown;
  double worst_user_slowdown = 0;
  // The same over users' mean *bounded* slowdown, max(1, JCT / max(duration, 10 s)), the
  // measure parallel-job scheduling reports (Feitelson et al.): a job of a few seconds that
  // waited an hour counts as one of ten seconds that did, not as a slowdown of thousands
  // that alone sets a user's mean. Reported beside the plain figure, not instead of it.
  double jain_users_bounded = 0;
  double worst_user_bounded_slowdown = 0;
  double mean_gpu_utilisation = 0;
  double data_moved_gb = 0;
  int64_t decisions = 0;  // placement attempts, placed or not
  double wall_seconds = 0, cpu_seconds = 0;
};

struct RunResult {
  RunMetrics metrics;
  std::vector<CenterUse> centers;
  std::vector<JobRecord> jobs;  // trace order, when keep_jobs
};

// InvalidArgument for a trace naming a GPU model the federation does not know, or an
// unknown policy.
absl::StatusOr<RunResult> Simulate(const Federation& federation, const std::vector<TraceJob>& trace,
                                   const SimOptions& options, const PolicyCatalog& catalog);

}  // namespace jc::sim
