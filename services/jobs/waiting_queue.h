#pragma once

// The job manager's waiting jobs (SPEC A11, A16): one queue, kept in memory and updated in
// place as jobs come, are placed, wait again or end — never rebuilt for a pass, and never
// read from the store on a decision. It holds each job's place in line (priority, then
// submission: what a job just submitted is placed ahead of) and its entry in the queue
// order (scheduler::JobQueue: fcfs, sef, hrrn, las, fair share, the longest wait), which every
// pass offers places in.

#include <cstdint>
#include <set>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "jointcloud/v1/job_record.pb.h"
#include "services/scheduler/job_queue.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

class WaitingQueue {
 public:
  // (-priority, since when it waits in µs since the epoch, seq, job id), first in line
  // first. Since when it waits: its longest-waiting replica's — its submission, or when a
  // retry, a service's replica restarting or one added by a scale fell due (WaitingSince) — so a service submitted long ago does not go
  // ahead of what was submitted since each time it grows (FCFS by arrival in the queue).
  using Entry = std::tuple<int, int64_t, int64_t, std::string>;

  explicit WaitingQueue(const scheduler::QueueSettings& settings) : ordered_(settings) {}

  // What a queue order counts on a job running (sef, hrrn): its learned estimate's assumed
  // length (a one-off's says so), else its time limit — never its own unenforced
  // estimatedDuration, which would let anyone go first by saying "1s" — else unknown (-1:
  // the order's default).
  struct Expectation {
    double expected_s = -1;
    bool one_off = false;
  };
  static Expectation ExpectationOf(const v1::CreateTrainJobRequest& request, const v1::DurationEstimate* estimate);

  // The job waits (a replica of it is WAITING): added, or its entry brought up to date
  // (`attained_s`: the service its ended attempts received, for las). Its expected length
  // is what was estimated when it was created (its record's), until Reestimate says more.
  void Put(const v1::JobRecord& r, double attained_s);
  // The job's estimate asked again while it waits (what ended since taught the estimator
  // more; null: nothing is known): the queue ranks it by this from now on, Put again or
  // not, until it leaves. Its record keeps what was expected at its creation. Nothing when
  // it does not wait.
  void Reestimate(int64_t seq, const v1::CreateTrainJobRequest& request, const v1::DurationEstimate* estimate);
  // It no longer waits (placed whole, ended, failed, stopped). Nothing when absent.
  void Remove(const v1::JobRecord& r) { Remove(r.seq()); }
  void Remove(int64_t seq);
  bool Contains(const v1::JobRecord& r) const;
  void Clear();
  size_t size() const { return in_line_.size(); }
  bool empty() const { return in_line_.empty(); }

  // The highest priority each project's jobs are ranked at: its quota's max_priority, the
  // grant a create is checked against (ProjectQuotas::AdmitPriority). A job above its
  // project's grant — admitted before grants existed or before one was lowered, its service
  // scaled since — is ranked at the grant: priority ranks above every queue order, and no
  // record outlives what its project may ask. A job without a project (an admin's) is
  // ranked at its own. Until the grants are first set (the quotas not read yet), none above
  // 0. Returns whether a grant changed: the caller Puts its waiting jobs above 0 again.
  bool SetPriorityGrants(absl::flat_hash_map<std::string, int> grants);
  // The priority `request`'s job is ranked at.
  int PriorityOf(const v1::CreateTrainJobRequest& request) const;

  // Whether `r` would be first in line: no waiting job has a higher priority, or the same
  // and waits since earlier.
  bool FirstInLine(const v1::JobRecord& r) const;
  const std::set<Entry>& in_line() const { return in_line_; }


  // The queue order's view, for a pass (JobQueue::Pass erases what it placed; a job Removed
  // during the pass is erased at once) and for explaining a job's place.
  scheduler::JobQueue& ordered() { return ordered_; }
  // The job of a sequence number in the queue; empty when none.
  std::string IdOf(int64_t seq) const;

 private:
  Entry EntryOf(const v1::JobRecord& r) const;

  std::set<Entry> in_line_;
  scheduler::JobQueue ordered_;
  absl::flat_hash_map<int64_t, Entry> by_seq_;
  absl::flat_hash_map<int64_t, Expectation> reestimated_;  // by seq: asked again since created
  absl::flat_hash_map<std::string, int> grants_;            // by project: its max_priority
  bool granted_ = false;                                    // SetPriorityGrants was called
};

}  // namespace jc::jobs
