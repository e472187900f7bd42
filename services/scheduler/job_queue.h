#pragma once

// The federation's queue order (SPEC A11, A15): which waiting job the scheduler tries
// next. FCFS: higher priority first, then submission order. Fair share: the project
// holding the smallest dominant share of the federation (its largest fraction of all
// GPUs, CPUs or memory, as Dominant Resource Fairness defines it) goes first, so one
// project cannot take every center while others wait; within a project, FCFS. A job that
// does not fit never holds back those behind it (backfill).
//
// Used by the simulator and the job manager alike; in memory, no I/O.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

enum class QueueOrder { kFcfs, kFairShare };

// "fcfs" or "fair_share"; InvalidArgument otherwise.
absl::StatusOr<QueueOrder> ParseQueueOrder(absl::string_view name);
absl::string_view QueueOrderName(QueueOrder order);

// max over kinds of held / total (kinds with no capacity count 0).
double DominantShare(const Resources& held, const Resources& total);

class JobQueue {
 public:
  explicit JobQueue(QueueOrder order) : order_(order) {}

  QueueOrder order() const { return order_; }
  // The federation's capacity, the denominator of every share.
  void SetCapacity(const Resources& total) { capacity_ = total; }

  // `seq` is unique per job and orders submissions.
  void Push(int64_t seq, int priority, const std::string& project);
  void Erase(int64_t seq);
  bool Contains(int64_t seq) const { return entries_.contains(seq); }
  size_t size() const { return entries_.size(); }

  // What a project's placed and unfinished work holds.
  void AddHeld(const std::string& project, const Resources& r);
  void SubtractHeld(const std::string& project, const Resources& r);
  double ShareOf(const std::string& project) const;

  // Offers the waiting jobs in queue order to `try_place(seq)`, which returns true when it
  // placed the job (and has called AddHeld for it); a placed job leaves the queue. Each job
  // is offered at most once per pass.
  template <typename TryPlace>
  void Pass(TryPlace&& try_place);

 private:
  struct Entry {
    int priority = 0;
    std::string project;
  };
  using Key = std::tuple<int, int64_t>;  // (-priority, seq)
  QueueOrder order_;
  Resources capacity_;
  absl::flat_hash_map<int64_t, Entry> entries_;
  std::set<Key> fcfs_;
  std::map<std::string, std::set<Key>> by_project_;
  std::map<std::string, Resources> held_;
};

template <typename TryPlace>
void JobQueue::Pass(TryPlace&& try_place) {
  if (order_ == QueueOrder::kFcfs) {
    for (auto it = fcfs_.begin(); it != fcfs_.end();) {
      int64_t seq = std::get<1>(*it);
      ++it;  // `it` stays valid when the job is erased
      if (try_place(seq)) Erase(seq);
    }
    return;
  }
  // Fair share: always the project with the smallest dominant share (then the higher
  // priority and older head job); its jobs in order until one is placed, then the shares
  // are compared again. Jobs passed over stay behind the project's cursor for this pass.
  struct Cursor {
    std::set<Key>::iterator next, end;
  };
  std::map<std::string, Cursor> cursors;
  std::set<std::tuple<double, Key, std::string>> heap;
  for (auto& [project, keys] : by_project_) {
    if (keys.empty()) continue;
    cursors[project] = {keys.begin(), keys.end()};
    heap.insert({ShareOf(project), *keys.begin(), project});
  }
  while (!heap.empty()) {
    auto [share, head, project] = *heap.begin();
    heap.erase(heap.begin());
    Cursor& c = cursors[project];
    bool placed = false;
    while (c.next != c.end && !placed) {
      int64_t seq = std::get<1>(*c.next);
      ++c.next;
      if (try_place(seq)) {
        placed = true;
        Erase(seq);
      }
    }
    if (placed && c.next != c.end) heap.insert({ShareOf(project), *c.next, project});
  }
}

}  // namespace jc::scheduler
