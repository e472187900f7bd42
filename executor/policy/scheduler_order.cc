// What the scheduler keeps for its queues' orders (SPEC B5): fair-share usage as time passes
// and jobs use CPU, the demand and group DRF weighs, and the inputs an order reads at a
// cycle's start. The orders themselves are behind QueueOrder (queue_order.h), one per
// policy. Part of the Scheduler class (scheduler.h); the cycle itself is scheduler.cc.

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "executor/policy/scheduler.h"
#include "executor/policy/scheduler_internal.h"

namespace jc::nexec {

void Scheduler::AdvanceFairshare(absl::Time now) {
  const absl::Duration elapsed = fairshare_time_ == absl::InfinitePast() ? absl::ZeroDuration() : now - fairshare_time_;
  fairshare_time_ = now;
  if (elapsed <= absl::ZeroDuration()) return;
  for (auto& [name, queue] : model_.queues) {
    if (!queue.fairshare) continue;
    std::map<std::string, std::pair<int, int>> held;  // user -> slots, GPUs
    for (const auto& [user, slots] : queue.used_by_user) {
      if (slots > 0) held[user].first = slots;
    }
    for (const auto& [user, amount] : queue.held_by_user) {
      if (amount.gpus > 0) held[user].second = static_cast<int>(amount.gpus + 0.5);
    }
    queue.fairshare->Advance(elapsed, held);
  }
}

void Scheduler::AddFairshareCpuTime(int64_t job_id, double cpu_seconds) {
  auto j = model_.jobs.find(job_id);
  if (j == model_.jobs.end()) return;
  auto q = model_.queues.find(j->second.request.queue);
  if (q != model_.queues.end() && q->second.fairshare) q->second.fairshare->AddCpuTime(j->second.request.user, cpu_seconds);
}

void Scheduler::AddFairshareHistory(const JobRequest& job, int slots, int gpus, double cpu_seconds, absl::Time start,
                                    absl::Time end, absl::Time now) {
  auto q = model_.queues.find(job.queue);
  if (q == model_.queues.end() || !q->second.fairshare) return;
  q->second.fairshare->AddPast(job.user, slots, gpus, cpu_seconds, start, end, now);
}

std::vector<FairshareTree::NodeReport> Scheduler::FairshareReport(const std::string& name) const {
  auto q = model_.queues.find(name);
  if (q == model_.queues.end() || !q->second.fairshare) return {};
  return q->second.fairshare->Report(q->second.used_by_user);
}

DominantShare Scheduler::JobDominantShare(int64_t job_id) const {
  auto it = model_.jobs.find(job_id);
  if (it == model_.jobs.end()) return {};
  return DominantShareOf(model_.DemandOf(it->second.request), model_.ClusterTotal());
}

OrderInputs Scheduler::InputsOf(const Queue& queue) const {
  OrderInputs in;
  in.pending = &queue.pending;
  in.used_by_user = &queue.used_by_user;
  in.held_by_user = &queue.held_by_user;
  in.request = [this](int64_t id) -> const JobRequest& { return model_.jobs.at(id).request; };
  in.demand = [this](const JobRequest& job) { return model_.DemandOf(job); };
  in.group_of = [this](const std::string& user) -> const std::string& { return model_.GroupOf(user); };
  in.cluster_total = [this] { return model_.ClusterTotal(); };
  in.cluster_of = [this](int64_t id) { return model_.jobs.at(id).cluster; };
  in.capacity_held = &queue.capacity_held;
  return in;
}

}  // namespace jc::nexec
