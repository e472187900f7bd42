#pragma once

// The federation's waiting jobs and the order they are offered places in (SPEC A11, A15,
// A16): higher priority first, then the queue order's rank (queue_order.h: first come
// first served, shortest expected first, highest response ratio next, least attained
// service), then submission. With
// fair share, the project holding the smallest dominant share of the federation (its
// largest fraction of all GPUs, CPUs or memory, as Dominant Resource Fairness defines it)
// goes first, so one project cannot take every center while others wait; within a project,
// the order's rank. A job that does not fit never holds back those behind it (backfill).
//
// Used by the simulator and the job manager alike; in memory, no I/O.

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/scheduler/queue_order.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

// The orders the job manager runs today (the others need its durations: issue 45).
enum class QueueOrder { kFcfs, kFairShare };

// "fcfs" or "fair_share"; InvalidArgument otherwise.
absl::StatusOr<QueueOrder> ParseQueueOrder(absl::string_view name);
absl::string_view QueueOrderName(QueueOrder order);
// The settings of one of those orders.
QueueSettings SettingsOf(QueueOrder order);

// max over kinds of held / total (kinds with no capacity count 0).
double DominantShare(const Resources& held, const Resources& total);

class JobQueue {
 public:
  explicit JobQueue(QueueOrder order);
  explicit JobQueue(const QueueSettings& settings);

  const QueueSettings& settings() const { return settings_; }
  // The federation's capacity, the denominator of every share.
  void SetCapacity(const Resources& total) { capacity_ = total; }

  // `seq` is unique per job and orders submissions.
  void Push(int64_t seq, int priority, const std::string& project);
  void Push(const QueuedJob& job);
  // What the order learns of a waiting job later (an estimate asked again, an attempt that
  // ran). `one_off`: the estimate is a one-off's (QueuedJob::one_off), said in Explain.
  void SetExpected(int64_t seq, double expected_s, bool one_off = false);
  void AddAttained(int64_t seq, double attained_s);
  void Erase(int64_t seq);
  bool Contains(int64_t seq) const { return entries_.contains(seq); }
  // The job has waited past max_wait_s: it goes ahead of the order, and a center drains
  // for it when it fits nowhere (filters.h DrainingCenterFor).
  bool Overdue(int64_t seq, double now) const;
  size_t size() const { return entries_.size(); }
  // Why the job stands where it does in the order, at `now`.
  std::string Explain(int64_t seq, double now) const;

  // What a project's placed and unfinished work holds.
  void AddHeld(const std::string& project, const Resources& r);
  void SubtractHeld(const std::string& project, const Resources& r);
  // Forgets what every project holds (a caller that recounts it from its jobs).
  void ClearHeld() { held_.clear(); }
  double ShareOf(const std::string& project) const;

  // Offers the waiting jobs in queue order at `now` to `try_place(seq)`, which returns
  // true when it placed the job (and has called AddHeld for it); a placed job leaves the
  // queue. Each job is offered at most once per pass.
  template <typename TryPlace>
  void Pass(double now, TryPlace&& try_place);
  template <typename TryPlace>
  void Pass(TryPlace&& try_place) {
    Pass(0.0, std::forward<TryPlace>(try_place));
  }

 private:
  // (-priority, not overdue, rank, seq): smaller goes first.
  using Key = std::tuple<int, int, double, int64_t>;
  Key KeyOf(const QueuedJob& job, double now) const;

  QueueSettings settings_;
  std::unique_ptr<QueueOrderPolicy> policy_;
  Resources capacity_;
  absl::flat_hash_map<int64_t, QueuedJob> entries_;
  std::map<std::string, Resources> held_;
};

template <typename TryPlace>
void JobQueue::Pass(double now, TryPlace&& try_place) {
  // The keys of this pass (ranks age with time), sorted once: O(n log n) per pass over the
  // jobs in memory, no I/O.
  std::vector<Key> keys;
  keys.reserve(entries_.size());
  for (const auto& [seq, job] : entries_) keys.push_back(KeyOf(job, now));
  std::sort(keys.begin(), keys.end());
  if (!settings_.fair_share) {
    for (const Key& key : keys) {
      const int64_t seq = std::get<3>(key);
      if (try_place(seq)) Erase(seq);
    }
    return;
  }
  // Fair share: always the project with the smallest dominant share (then the higher
  // priority and first-ranked head job); its jobs in order until one is placed, then the
  // shares are compared again. Jobs passed over stay behind the project's cursor.
  std::map<std::string, std::vector<Key>> by_project;
  for (const Key& key : keys) by_project[entries_.at(std::get<3>(key)).project].push_back(key);
  std::map<std::string, size_t> cursor;
  std::set<std::tuple<double, Key, std::string>> heap;
  for (const auto& [project, list] : by_project) heap.insert({ShareOf(project), list.front(), project});
  while (!heap.empty()) {
    auto [share, head, project] = *heap.begin();
    heap.erase(heap.begin());
    const std::vector<Key>& list = by_project[project];
    size_t& next = cursor[project];
    bool placed = false;
    while (next < list.size() && !placed) {
      const int64_t seq = std::get<3>(list[next]);
      ++next;
      if (try_place(seq)) {
        placed = true;
        Erase(seq);
      }
    }
    if (placed && next < list.size()) heap.insert({ShareOf(project), list[next], project});
  }
}

}  // namespace jc::scheduler
