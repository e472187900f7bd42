#include "services/scheduler/job_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace jc::scheduler {

absl::StatusOr<QueueOrder> ParseQueueOrder(absl::string_view name) {
  if (name == "fcfs") return QueueOrder::kFcfs;
  if (name == "fair_share") return QueueOrder::kFairShare;
  return absl::InvalidArgumentError(absl::StrCat("unknown queue order \"", name, "\" (fcfs, fair_share)"));
}

absl::string_view QueueOrderName(QueueOrder order) { return order == QueueOrder::kFcfs ? "fcfs" : "fair_share"; }

double DominantShare(const Resources& held, const Resources& total) {
  double share = 0;
  auto kind = [&](double h, double t) {
    if (t > 0) share = std::max(share, h / t);
  };
  kind(held.gpu, total.gpu);
  kind(held.cpu, total.cpu);
  kind(held.memory_mb, total.memory_mb);
  kind(held.npu, total.npu);
  kind(held.mlu, total.mlu);
  return share;
}

void JobQueue::Push(int64_t seq, int priority, const std::string& project) {
  if (entries_.contains(seq)) return;
  entries_[seq] = {priority, project};
  Key key{-priority, seq};
  fcfs_.insert(key);
  by_project_[project].insert(key);
}

void JobQueue::Erase(int64_t seq) {
  auto it = entries_.find(seq);
  if (it == entries_.end()) return;
  Key key{-it->second.priority, seq};
  fcfs_.erase(key);
  auto p = by_project_.find(it->second.project);
  // An emptied project keeps its (empty) set: a pass may hold iterators into it.
  if (p != by_project_.end()) p->second.erase(key);
  entries_.erase(it);
}

void JobQueue::AddHeld(const std::string& project, const Resources& r) { held_[project] += r; }

void JobQueue::SubtractHeld(const std::string& project, const Resources& r) {
  auto it = held_.find(project);
  if (it == held_.end()) return;
  it->second -= r;
}

double JobQueue::ShareOf(const std::string& project) const {
  auto it = held_.find(project);
  return it == held_.end() ? 0 : DominantShare(it->second, capacity_);
}

}  // namespace jc::scheduler
