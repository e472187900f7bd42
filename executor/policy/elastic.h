#pragma once

// Elastic jobs (SPEC B4, `nexec submit -n min,max`), a unit of the scheduler's model
// (issue 48, "the house"): a running job grows toward its maximum into slots nobody
// waiting could use, and gives what it grew by back first when a waiting job needs it —
// before anything is preempted. It owns which running jobs are elastic, how many
// allocations they grew by, and the resizes the master has not yet taken; it works over
// the ClusterModel and the LimitBook, and asks the Placer (the scheduler) where slots fit.
//
// A growth is one more allocation per host at the end of the job's placement; the job
// gives them back youngest first, so what it started with is never taken this way.

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "executor/policy/cluster.h"
#include "executor/policy/cluster_model.h"
#include "executor/policy/limit_book.h"
#include "executor/policy/placer.h"

namespace jc::nexec {

class Elastic {
 public:
  using Job = ClusterModel::Job;
  using Queue = ClusterModel::Queue;

  Elastic(ClusterModel& model, LimitBook& limits, Placer& placer) : model_(model), limits_(limits), placer_(placer) {}
  // What `other` holds, over another model, limits and placer (its owner moved).
  Elastic(Elastic&& other, ClusterModel& model, LimitBook& limits, Placer& placer)
      : model_(model),
        limits_(limits),
        placer_(placer),
        jobs_(std::move(other.jobs_)),
        grown_allocations_(other.grown_allocations_),
        took_back_(other.took_back_),
        resizes_(std::move(other.resizes_)) {}
  Elastic(const Elastic&) = delete;
  Elastic& operator=(const Elastic&) = delete;

  // A job was placed: elastic when it may hold more than it asked for.
  void Placed(const JobRequest& job);
  // A running job was restored after a restart (with a maximum: elastic); `grown` of its
  // placement's allocations are growths.
  void Restored(const JobRequest& job, int grown);
  // A running job's resources went back (it ended, or was requeued).
  void Released(const Job& job);
  // Whether any running job holds more than it started with.
  bool AnyGrown() const { return grown_allocations_ > 0; }
  // Slots were taken back this cycle (by preemption) for jobs still to start: the cycle
  // grows nothing.
  void TookBack() { took_back_ = true; }

  // A waiting job that does not fit: takes allocations elastic jobs grew by (`taken`),
  // until it fits (placed into `out`: true) or none is left. Then Settle keeps them (the
  // job started, or preempts for the rest) or gives them back.
  using TakenBack = std::vector<std::pair<int64_t, HostAllocation>>;
  bool TakeBack(const Job& job, Queue& queue, Placement* out, TakenBack* taken);
  void Settle(TakenBack* taken, int64_t for_job, bool keep);
  // At the end of cycle `cycle`: grows running elastic jobs into the slots left (never
  // those of jobs placed in this cycle, whose tasks start first).
  void Grow(uint64_t cycle);

  // The allocations running elastic jobs gained or gave back since the last call, in order.
  std::vector<Resize> TakeResizes() { return std::exchange(resizes_, {}); }

 private:
  // Adds one allocation to a running job's placement (grow) or removes its last one
  // (shrink), with hosts, queue and limits counted again.
  void ChangeAllocation(Job& job, Queue& queue, const HostAllocation& allocation, bool grow);
  // The job placed on what `taken` gave back left some of it free: the elastic job `e`
  // keeps that part (a smaller allocation in its place); `taken` is what it gave.
  void ReturnUnneeded(Job& e, Queue& eq, HostAllocation* taken);
  // The most slots of the job's section a growth can take now, within its queue's and
  // virtual cluster's bounds.
  int GrowthRoom(const Job& job, const Queue& queue) const;

  ClusterModel& model_;
  LimitBook& limits_;
  Placer& placer_;
  std::set<int64_t> jobs_;     // running elastic jobs, in submission order
  int grown_allocations_ = 0;  // allocations they grew by, in all
  bool took_back_ = false;     // this cycle took slots back: it grows nothing
  std::vector<Resize> resizes_;
};

}  // namespace jc::nexec
