#pragma once

// What the Slurm adapter reads from Slurm's commands (squeue, sacct, sinfo), as pure
// functions of their text: the cluster, and any account that can name a job or a
// reason, writes into it (issue 44 Deliver 3: fuzzed by tests/fuzz/slurm_output_fuzz.cc).
// Lines that do not have the fields asked for are skipped, never trusted: a line Slurm
// adds (a warning, a new version's extra column) does not stop the adapter's polls.
// Numbers out of range count as 0, never as wrapped values.

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
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

}  // namespace jc::adapter
