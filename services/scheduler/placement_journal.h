#pragma once

// The scheduler's explanations kept past a restart (issue 49 item 4): after a restart
// `jcctl job explain` said "never placed" of a job placed 40 s before, since the records
// (placement_record.h) live in the deciding instance's memory only. Every placement is
// handed here as it is made — a pointer into a queue, nothing more on the decision path — and
// a background thread builds its protobuf, trims it to a bounded size and writes the
// batch (one statement a flush) to the store's job_placements table, pruned to the newest
// jobs. GetJobPlacement reads it back when memory has none (another instance's decision,
// or one made before a restart).
//
// What a kept record holds, per job: the first `max_replicas` replicas; per replica the
// chosen center, the `top_scored` feasible centers with the highest totals, and the first
// `filtered` centers a filter removed, each reason cut to `max_reason_bytes` — at most
// 16 × (1 + 5 + 8) centers, under 64 KB however wide the job and the federation, a few KB
// for a typical job. What was left out is counted
// (ReplicaPlacement.centers_left_out, Placement.replicas_left_out).

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/periodic_task.h"
#include "common/store/store.h"
#include "jointcloud/v1/scheduler.pb.h"
#include "services/scheduler/placement_record.h"

namespace prometheus {
class Counter;
class Registry;
}  // namespace prometheus

namespace jc::scheduler {

struct PlacementJournalOptions {
  int keep_jobs = 100000;  // rows kept: the newest jobs' placements (--placement_history)
  absl::Duration flush_interval = absl::Seconds(1);
  int max_replicas = 16;
  int top_scored = 5;
  int filtered = 8;
  size_t max_reason_bytes = 160;
  // Placements waiting for a write while the store does not take them; past it the oldest
  // are dropped (jc_placement_records_dropped_total): an explanation is not worth memory
  // without bound, and no job's state depends on one.
  size_t max_pending = 50000;
};

class PlacementJournal {
 public:
  PlacementJournal(store::Store* store, const ScorerRegistry* scorers, PlacementJournalOptions options = {});
  ~PlacementJournal();
  PlacementJournal(const PlacementJournal&) = delete;
  PlacementJournal& operator=(const PlacementJournal&) = delete;

  void Start();
  // Stops the thread and writes what is pending (once more; a failure is logged).
  void Stop();

  // A placement just made (the scheduler calls it under its lock): queued, the job's
  // earlier one not yet written replaced.
  void Add(std::shared_ptr<const PlacementRecord> record, absl::Time decided_at);

  // Writes what is queued now, in one transaction, then prunes past keep_jobs now and then.
  // A failure keeps what was queued (a newer placement of a job wins) for the next flush.
  absl::Status Flush();

  // The kept placement of `job_id`, from_history set; NotFound when the store has none.
  absl::StatusOr<jointcloud::v1::Placement> Read(const std::string& job_id);

  void EnableMetrics(prometheus::Registry& registry);

  // `placement` trimmed to what a kept record holds (see the file's comment).
  static void Trim(const PlacementJournalOptions& options, jointcloud::v1::Placement* placement);
  // What Trim keeps of `record`'s explanation, built without the rest: Trim of ToProto,
  // at the cost of the centers kept rather than of every center of the federation.
  static void Kept(const PlacementJournalOptions& options, const PlacementRecord& record,
                   const ScorerRegistry& scorers, jointcloud::v1::Placement* placement);

 private:
  struct Pending {
    std::shared_ptr<const PlacementRecord> record;
    absl::Time decided_at;
    uint64_t order = 0;  // arrival, for dropping the oldest
  };

  // Past max_pending, the oldest waiting placements go (counted). Holds mu_.
  void DropPastBound();

  store::Store* store_;
  const ScorerRegistry* scorers_;
  PlacementJournalOptions options_;
  std::mutex mu_;
  std::map<std::string, Pending> pending_;  // by job id
  uint64_t next_order_ = 0;
  std::mutex flush_mu_;  // one flush at a time (the thread's, Stop's, a test's)
  int64_t written_since_prune_ = 0;
  PeriodicTask task_;
  prometheus::Counter* written_ = nullptr;
  prometheus::Counter* dropped_ = nullptr;
  prometheus::Counter* failed_ = nullptr;
};

}  // namespace jc::scheduler
