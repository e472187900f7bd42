#pragma once

// The executor's view of its cluster as the scheduling core sees it: hosts with their
// resources, queues with their policies, and jobs waiting or running. Plain data; the
// master fills it from configuration, agents and submissions.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "executor/policy/capacity.h"
#include "executor/policy/drf.h"
#include "executor/policy/fairshare.h"
#include "executor/policy/time_window.h"
#include "executor/reqstr/requirement.h"

namespace jc::nexec {

struct HostType {
  std::string name;
  // Relative CPU speed (SPEC B5 heterogeneous hosts): among hosts with as many free slots,
  // the faster is chosen first (the pack and spread orders), and resource requirements
  // read it as `cpuf`.
  double cpu_factor = 1.0;
};

// Load thresholds on one resource (B5, LSF's loadSched/loadStop): above `schedule` no new
// job is dispatched to the host; above `stop` running jobs are suspended (or killed),
// and resumed once the load is back under `schedule`. "Above" follows the resource's
// direction: a larger r1m is busier, a smaller memfree is.
struct LoadThreshold {
  std::optional<double> schedule, stop;
};
using LoadThresholds = std::map<std::string, LoadThreshold>;

// The most memory (or swap) a host may declare, in MB: 1 PiB. The agent refuses more at its
// start; the master refuses a heartbeat declaring more (an older agent's), or a size that is
// negative or not a finite number, before the scheduler counts it.
inline constexpr double kMaxHostMemMb = 1024.0 * 1024 * 1024;

struct HostConfig {
  std::string name;
  std::string type;        // a HostType name ("" = default, factor 1)
  int slots = 1;           // job slots, usually the number of cores
  double mem_mb = 0;       // memory the jobs may reserve (rusage[mem=...])
  double swap_mb = 0;
  std::vector<int> gpus;   // GPU indices (from nvidia-smi or declared)
  ResourceValues resources;  // static and sensor resources: numbers, text, tags
  LoadThresholds load_thresholds;  // the host's own (configuration)
};

enum class Balance { kPack, kSpread };

struct QueueConfig {
  std::string name;
  int priority = 0;                  // higher queues dispatch first
  std::vector<std::string> users;    // users or user groups allowed; empty = everyone
  // Hosts the queue may use, each optionally "+n" for preference n (higher first);
  // empty = every host.
  std::vector<std::string> hosts;
  int max_slots = 0;                 // slots all its running jobs may hold; 0 = no limit
  int max_slots_per_user = 0;        // 0 = no limit
  Balance balance = Balance::kPack;
  bool user_round_robin = false;     // one job per user in turn, instead of plain FCFS
  bool gpu_shared = false;           // GPUs may be given to several jobs at once
  bool allow_interactive = true;
  bool rerun_on_host_failure = false;
  // Queue actions (B6): shell commands run on the first host as the job's user before
  // and after every job's command (before and after the job's own -E / -Ep). A pre-exec
  // that fails or outlasts its timeout requeues the job; after pre_exec_retries such
  // requeues the job ends.
  std::string pre_exec;
  std::string post_exec;
  int pre_exec_timeout_seconds = 600;
  int pre_exec_retries = 3;
  // Bind each task to as many cores of its host as it has slots there (B6).
  bool cpu_binding = false;
  // The most processes and threads each task of the queue's jobs may have at once (its
  // cgroup's pids.max: a fork bomb stops there); 0: no limit.
  int64_t pids_limit = 0;
  // Job controls (B6, LSF's JOB_CONTROLS): shell commands run instead of the signals for
  // suspend, resume and kill; empty: the signal.
  std::string suspend_action, resume_action, kill_action;
  // Run window (B6, LSF's RUN_WINDOW): jobs are dispatched only inside it, and running
  // jobs are suspended when it closes and resumed when it opens. Always open by default.
  TimeWindows run_window;
  // Load thresholds for the queue's jobs on any host; what happens above `stop`.
  LoadThresholds load_thresholds;
  bool threshold_kills = false;  // kill instead of suspend
  // Hierarchical fair share (B5): who goes first among the queue's users; absent: FCFS
  // (or round robin).
  std::optional<FairshareConfig> fairshare;
  // Dominant Resource Fairness (the course's DRF): order pending jobs by each job's
  // dominant share of the cluster's slots, memory and GPUs, or serve the user (or user
  // group) holding the smallest dominant share first. Off: FCFS (or the above).
  DrfBy drf = DrfBy::kOff;
  // Preemption (B5, LSF's PREEMPTIVE[...]): queues of lower priority whose running jobs
  // this queue's jobs may preempt when they cannot start otherwise. A victim without GPUs
  // is suspended (SIGSTOP) and its slots lent until they are free again; one holding GPUs
  // is requeued (stopping frees no GPU memory), SIGTERM first and SIGKILL after its own
  // queue's `preempt_grace`.
  std::vector<std::string> preempt;
  // As a victim: a job of this queue is preempted at most this many times (0: no limit),
  // and when requeued has this long between SIGTERM and SIGKILL to save its work.
  int max_preemptions = 0;
  absl::Duration preempt_grace = absl::Seconds(30);
  // Reservation and backfill (B5, LSF's SLOT_RESERVE + BACKFILL): the queue's first job
  // that cannot start reserves the hosts it will get when running jobs end (by their run
  // limits); those hosts' free slots are held for it, except for jobs with a run limit
  // that ends before the reserved start (backfill).
  bool backfill = false;
  // Capacity scheduling (the course's virtual clusters): the queue's users in groups, each
  // with a guarantee it may always have and bonus capacity up to its max; a group under
  // its guarantee reclaims what others borrowed of it by preemption (as above: CPU jobs
  // suspended, GPU jobs requeued). Absent: no groups.
  std::optional<CapacityConfig> capacity;
};

// What a job asks of the scheduler.
struct JobRequest {
  int64_t id = 0;
  std::string user;
  std::string queue;
  int slots = 1;                 // -n; a multi-section requirement sets its own
  Requirement requirement;
  bool exclusive = false;        // no other job on its hosts
  bool interactive = false;
  int gpus_per_slot = 0;         // --gpus, added to rusage[gpu=...]
  std::string project;           // -P: what limits over projects count it under
  std::string app;               // -app: the application profile
  int preemptions = 0;           // times it was preempted already (max_preemptions)
  absl::Duration run_limit;      // -W; zero: none (such a job never backfills)
  // Elastic jobs (B4, -n min,max): starts with `slots` and grows toward max_slots as
  // slots are free once every waiting job had its turn; 0: not elastic.
  int max_slots = 0;
};

// A running job the scheduler chose to preempt for a pending one.
struct Preemption {
  int64_t victim = 0;
  int64_t preemptor = 0;
  bool requeue = false;  // holds GPUs: requeued; else suspended with its slots lent
  std::string reason;    // "preempted by job 7 (queue high)"
};

struct HostAllocation {
  std::string host;
  int slots = 0;
  std::vector<int> gpus;  // indices, assigned by the scheduler
  double mem_mb = 0;
  // Other consumable resources reserved here (rusage[] of sensor and static numbers):
  // amount by resource, and for `assign` resources the units given (like GPU indices).
  std::map<std::string, double> reserved;
  std::map<std::string, std::vector<int>> units;
};

// An elastic job grew by an allocation, or gave one back (shrank) so a waiting job of
// its queue's priority or higher could start.
struct Resize {
  int64_t job_id = 0;
  bool grow = true;
  HostAllocation allocation;
  int64_t for_job = 0;  // a shrink: the job that needed the slots
};

// How a numeric resource is consumed (RESS fields, SPEC B1).
struct ResourceTraits {
  // direction: increase — a larger value means less of it (network traffic): order[]
  // puts the smallest first. The default (decrease) is free memory's.
  bool larger_is_less = false;
  // release: a suspended job gives its reservation back (CPU time, bandwidth), and takes
  // it again when resumed; otherwise it keeps it (memory).
  bool release = false;
  // assign: the scheduler hands out specific units 0..n-1 (ports, devices), never one to
  // two jobs; otherwise only an amount is reserved (bandwidth, licenses).
  bool assign = false;
  // slotresource: rusage[] is per slot (memory per task); otherwise per job, reserved once
  // on the job's first host that has it (scratch storage).
  bool per_slot = true;
};

// Where each section of a job runs, in section order.
struct Placement {
  int64_t job_id = 0;
  std::vector<std::vector<HostAllocation>> sections;
  // Started on slots held for another job's reservation, ending before it: that job.
  int64_t backfilled_before = 0;
};

// A pending job's reservation: the hosts it will get and when at the latest.
struct ReservationView {
  std::vector<std::string> hosts;
  absl::Time start = absl::InfiniteFuture();  // infinite: a job it waits for has no run limit
};

// When a job not yet submitted would start (Scheduler::EstimateStart).
struct StartEstimate {
  absl::Time start = absl::InfiniteFuture();  // infinite: unknown, `reason` says why
  std::string reason;
  bool known() const { return start != absl::InfiniteFuture(); }
};

}  // namespace jc::nexec
