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

QueueSettings SettingsOf(QueueOrder order) { return *ParseQueueSettings(QueueOrderName(order)); }

JobQueue::JobQueue(QueueOrder order) : JobQueue(SettingsOf(order)) {}

JobQueue::JobQueue(const QueueSettings& settings) : settings_(settings), policy_(MakeQueueOrderPolicy(settings)) {}

void JobQueue::Push(int64_t seq, int priority, const std::string& project) {
  QueuedJob job;
  job.seq = seq;
  job.priority = priority;
  job.project = project;
  Push(job);
}

void JobQueue::Push(const QueuedJob& job) { entries_.try_emplace(job.seq, job); }

void JobQueue::SetExpected(int64_t seq, double expected_s, bool one_off) {
  if (auto it = entries_.find(seq); it != entries_.end()) {
    it->second.expected_s = expected_s;
    it->second.one_off = one_off;
  }
}

void JobQueue::AddAttained(int64_t seq, double attained_s) {
  if (auto it = entries_.find(seq); it != entries_.end()) it->second.attained_s += attained_s;
}

void JobQueue::Erase(int64_t seq) { entries_.erase(seq); }

JobQueue::Key JobQueue::KeyOf(const QueuedJob& job, double now) const {
  const bool overdue = now - job.submitted >= settings_.max_wait_s;
  // Overdue jobs go ahead, first come first served among them.
  return {-job.priority, overdue ? 0 : 1, overdue ? 0.0 : policy_->Rank(job, now), job.seq};
}

bool JobQueue::Overdue(int64_t seq, double now) const {
  auto it = entries_.find(seq);
  return it != entries_.end() && now - it->second.submitted >= settings_.max_wait_s;
}

std::string JobQueue::Explain(int64_t seq, double now) const {
  auto it = entries_.find(seq);
  if (it == entries_.end()) return "";
  if (now - it->second.submitted >= settings_.max_wait_s) {
    return absl::StrCat("waited past the queue's longest wait (", settings_.max_wait_s / 3600, " h): ahead of the order");
  }
  return policy_->Explain(it->second, now);
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
