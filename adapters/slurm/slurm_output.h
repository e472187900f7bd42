#pragma once

// What the Slurm adapter reads from Slurm's commands (squeue, sacct, sinfo), as pure
// functions of their text: the cluster, and any account that can name a job or a
// reason, writes into it (issue 44 Deliver 3: fuzzed by tests/fuzz/slurm_output_fuzz.cc).
// Lines that do not have the fields asked for are skipped, never trusted: a line Slurm
// adds (a warning, a new version's extra column) does not stop the adapter's polls.
// Numbers out of range count as 0, never as wrapped values.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "adapters/sdk/backend.h"

namespace jc::adapter {

// "1-02:03:04.500", "03:04.5" (sacct's durations) -> seconds; 0 for anything else.
double SlurmDurationSeconds(absl::string_view text);

// What Slurm says of a job -> the replica's state. `wait_status` is squeue's exit_code
// (a wait(2) status: exit code << 8 | signal).
ReplicaObservation ObserveSlurmJob(absl::string_view state, absl::string_view reason, int wait_status);

// sacct's ExitCode ("3:0": code, signal) -> a wait status; out of range parts count as 0.
int WaitStatusFromExitCode(absl::string_view text);

// An ended replica's start and end ("2026-11-26T08:00:01", Slurm's local time; "Unknown"
// and "None" are no time) into `o`, with its wall time.
void AddSlurmTimes(absl::string_view start, absl::string_view end, ReplicaObservation* o);

// `squeue --states=all -h -O <kSqueueJobFields>`: per job id, what squeue says of it.
inline constexpr absl::string_view kSqueueJobFields = "JobID:|,State:|,Reason:|,exit_code:|,StartTime:|,EndTime:|";
std::map<std::string, ReplicaObservation> ParseSqueueJobs(absl::string_view text);

// `squeue -h -o %T`: how many jobs run and how many wait.
struct SqueueCounts {
  int64_t running = 0, waiting = 0;
};
SqueueCounts ParseSqueueStates(absl::string_view text);

// `squeue --states=all -h --name=<name> -o %i|%k` (job id, comment): the oldest job whose
// comment is exactly `tag` ("" when none). Anyone may name a job anything; only the tag
// tells the adapter's own.
std::string OldestTaggedJob(absl::string_view text, absl::string_view tag);

// What the adapter asks sacct for an ended job, and what it makes of the answer (`sacct -n
// -P -o` those fields): per job in `wanted`, its state, start and end, CPU time (TotalCPU),
// peak memory (the largest MaxRSS of its steps), GPUs allocated (AllocTRES gres/gpu) and
// the bytes its steps read and wrote (TRESUsageInTot/OutTot fs/disk, summed over steps).
inline constexpr absl::string_view kSacctFields =
    "JobIDRaw,State,ExitCode,Start,End,TotalCPU,MaxRSS,AllocTRES,TRESUsageInTot,TRESUsageOutTot";
void ReadSacct(absl::string_view text, const std::set<std::string>& wanted,
               std::map<std::string, ReplicaObservation>* out);

// The count of `name` in a gres string as sinfo prints it: "gpu:8", "gpu:a100:4(S:0-1)",
// "gpu:2(IDX:0-1),npu:1", "(null)".
int GresCount(absl::string_view gres, absl::string_view name);

// Capacity and use of the nodes that can run jobs, from
// `sinfo -N -h -O NodeHost:|,CPUsState:|,Memory:|,AllocMem:|,Gres:|,GresUsed:|,StateLong:|`.
struct SlurmNodeTotals {
  int nodes = 0;
  int cpu_total = 0, cpu_alloc = 0;
  int64_t memory_mb = 0, memory_alloc_mb = 0;
  int gpu_total = 0, gpu_alloc = 0;
};
SlurmNodeTotals ParseSinfoNodes(absl::string_view sinfo_output);

// Slurm's queue as its backfill planner sees it (SPEC A16). `squeue --start -h -o
// <kSqueueQueueFields>` lists pending jobs with the start the planner expects (%S: "N/A"
// until it has planned them, or when a job in the way has no time limit); `squeue -h -t
// RUNNING -o <kSqueueQueueFields>` lists running ones with when their time limit ends (%e).
// Fields: job id, state, start, end, CPUs, gres per node ("gres:gpu:2", "gres/gpu:2", "N/A").
inline constexpr absl::string_view kSqueueQueueFields = "%i|%T|%S|%e|%C|%b";
struct QueuedJob {
  std::string id;
  bool pending = false;                     // else running (holding what it was given)
  std::optional<absl::Time> start, end;     // nullopt: Slurm does not know (N/A, NONE, Unknown)
  int cpus = 0;
  int gpus = 0;
};
std::vector<QueuedJob> ParseSqueueQueue(absl::string_view text);

// How long a replica needing `cpus` and `gpus`, submitted at `now`, waits by Slurm's plan:
// no earlier than the expected start of every pending job that needs no more of either
// (it was queued first and fits wherever this one would), nor than the end of enough
// running jobs to free what it needs beside `free_cpus`/`free_gpus` (the cluster's, as
// sinfo says). nullopt: unknown — a pending job it waits behind has no expected start, or
// a running job it waits for has no time limit, or it never fits. Pending jobs that need
// more are left out (the plan may fit this one before them), so this is Slurm's word
// bounded from below, not a promise.
std::optional<absl::Duration> SlurmStartWait(const std::vector<QueuedJob>& jobs, int free_cpus, int free_gpus,
                                             int cpus, int gpus, absl::Time now);

}  // namespace jc::adapter
