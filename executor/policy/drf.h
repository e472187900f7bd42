#pragma once

// Dominant Resource Fairness (the scheduling course's DRF; Ghodsi et al.): with several
// resource types, a job's (or a consumer's) share of the cluster is its largest share of
// any one type — its dominant share — and the job with the smallest one goes first.
//
// The course's example, on a cluster of 10 GPUs and 20 GB of memory: job 1 asks 2 GPUs
// and 8 GB (shares 0.2 and 0.4: dominant share 0.4, memory), job 2 asks 5 GPUs and 4 GB
// (0.5 and 0.2: dominant share 0.5, GPUs); job 1 goes first.
//
// Per consumer (a user, or a user group) the order is max-min fair, by progressive
// filling: the consumer holding the smallest dominant share gets its oldest job next,
// that job's demand counts as held, and so on.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace jc::nexec {

// An amount of each resource DRF weighs: slots (CPUs), memory, GPUs.
struct DrfVector {
  double slots = 0;
  double mem_mb = 0;
  double gpus = 0;
  DrfVector& operator+=(const DrfVector& o) {
    slots += o.slots;
    mem_mb += o.mem_mb;
    gpus += o.gpus;
    return *this;
  }
};

enum class DrfBy { kOff, kJob, kUser, kGroup };

struct DominantShare {
  double share = 0;
  const char* resource = "slots";  // "slots", "mem" or "gpu"
};
// The largest of the amount's shares of `total` (types the cluster lacks are skipped).
DominantShare DominantShareOf(const DrfVector& amount, const DrfVector& total);

struct DrfJob {
  int64_t id = 0;
  std::string consumer;  // user or group; unused when ordering per job
  DrfVector demand;
};
// The dispatch order of `pending` (in FCFS order). Per job: by each job's own dominant
// share, FCFS among equals. Per consumer: progressive filling from what each holds.
std::vector<int64_t> DrfOrder(const std::vector<DrfJob>& pending, DrfBy by, const DrfVector& total,
                              std::map<std::string, DrfVector> held);

}  // namespace jc::nexec
