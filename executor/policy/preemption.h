#pragma once

// Preemption (SPEC B5), a unit (Preemptions: Preemption is what one decided, cluster.h) of the scheduler's model (issue 48, "the house"): a job of
// a preemptive queue, or one under its fair share, or of a virtual cluster owed its
// guarantee, takes what it needs from running jobs; the victims are suspended (their slots
// lent to the preemptor, resumed once free again) or, holding GPUs, requeued. It owns the
// preemptions and resumes the master has not yet taken and which victims each preemptor
// waits for; it works over the ClusterModel, asks the Placer (the scheduler) whether the
// job fits, holds the lent slots for it through Backfill, and writes the waiting job's
// reason into the scheduler's pending reasons.

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "executor/policy/backfill.h"
#include "executor/policy/cluster.h"
#include "executor/policy/cluster_model.h"
#include "executor/policy/placer.h"

namespace jc::nexec {

class Preemptions {
 public:
  using Job = ClusterModel::Job;
  using Queue = ClusterModel::Queue;
  using PendingReasons = std::unordered_map<int64_t, std::string>;

  Preemptions(ClusterModel& model, Placer& placer, Backfill& backfill, PendingReasons& reasons)
      : model_(model), placer_(placer), backfill_(backfill), reasons_(reasons) {}
  // What `other` holds, over another model, placer, backfill and reasons (its owner moved).
  Preemptions(Preemptions&& other, ClusterModel& model, Placer& placer, Backfill& backfill, PendingReasons& reasons)
      : model_(model),
        placer_(placer),
        backfill_(backfill),
        reasons_(reasons),
        preemptions_(std::move(other.preemptions_)),
        resumes_(std::move(other.resumes_)),
        victims_of_(std::move(other.victims_of_)) {}
  Preemptions(const Preemptions&) = delete;
  Preemptions& operator=(const Preemptions&) = delete;

  // A job of a preemptive queue that did not fit: the fewest victims (of the lower queues
  // it may preempt, the lowest queue and in it the youngest job first) whose resources let
  // it fit; records them and answers whether any were found (or it still waits for
  // earlier ones).
  bool ByQueue(const Job& job, Queue& queue, absl::Time now);
  // Fair-share preemption (a fair-share queue with preempt on): running jobs of the same
  // queue whose users' branches are further over their share (FairshareTree::MayPreempt),
  // the lowest user priority first, in it the youngest job.
  bool ByFairshare(const Job& job, Queue& queue, absl::Time now);
  // The common part: victims from `candidates` (best first) until the job fits, then the
  // fewest of them; `eligible` is asked again as earlier victims are taken.
  bool Among(const Job& job, Queue& queue, const std::vector<Job*>& candidates,
             const std::function<bool(const Job&)>& eligible, const std::string& why, absl::Time now);
  // The job's victims being requeued still hold what it waits for: it preempts no more.
  bool WaitingForVictims(int64_t job_id);
  // The job started, or left the queue: it waits for no victims.
  void Forget(int64_t job_id) { victims_of_.erase(job_id); }

  // A victim's slots lent (sign -1) or taken back (+1), and the rest of what it holds for
  // a victim to requeue (`everything`).
  void Lend(const Job& victim, int sign, bool everything);
  // Resumes the queue's lent jobs whose slots are free again and whose preemptor started
  // or left.
  void ResumeLent(Queue& queue);

  // What was decided to preempt (each once), and the preempted jobs whose slots are free
  // again, to resume, since the last call.
  std::vector<Preemption> TakePreemptions() { return std::exchange(preemptions_, {}); }
  std::vector<int64_t> TakeResumes() { return std::exchange(resumes_, {}); }
  // Scheduler::CancelPreemption, RestorePreempted, RestoreRequeueing.
  absl::Status Cancel(int64_t victim);
  absl::Status RestorePreempted(int64_t victim, int64_t preemptor);
  absl::Status RestoreRequeueing(int64_t victim, int64_t preemptor);

 private:
  ClusterModel& model_;
  Placer& placer_;
  Backfill& backfill_;
  PendingReasons& reasons_;
  std::vector<Preemption> preemptions_;
  std::vector<int64_t> resumes_;
  std::unordered_map<int64_t, std::vector<int64_t>> victims_of_;  // preemptor -> its victims
};

}  // namespace jc::nexec
