// Queue orders (SPEC B5): the order a cycle takes a queue's pending jobs in — first come first served,
// round robin over users, hierarchical fair share (fairshare.h), dominant resource fairness (drf.h).
// Part of the Scheduler class (scheduler.h); the cycle itself is scheduler.cc.

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
  for (auto& [name, queue] : queues_) {
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
  auto j = jobs_.find(job_id);
  if (j == jobs_.end()) return;
  auto q = queues_.find(j->second.request.queue);
  if (q != queues_.end() && q->second.fairshare) q->second.fairshare->AddCpuTime(j->second.request.user, cpu_seconds);
}

void Scheduler::AddFairshareHistory(const JobRequest& job, int slots, int gpus, double cpu_seconds, absl::Time start,
                                    absl::Time end, absl::Time now) {
  auto q = queues_.find(job.queue);
  if (q == queues_.end() || !q->second.fairshare) return;
  q->second.fairshare->AddPast(job.user, slots, gpus, cpu_seconds, start, end, now);
}

std::vector<FairshareTree::NodeReport> Scheduler::FairshareReport(const std::string& name) const {
  auto q = queues_.find(name);
  if (q == queues_.end() || !q->second.fairshare) return {};
  return q->second.fairshare->Report(q->second.used_by_user);
}

DrfVector Scheduler::ClusterTotal() const {
  DrfVector total;
  for (const Host& h : hosts_) {
    if (h.state == HostState::kUnavailable) continue;
    total.slots += h.config.slots;
    total.mem_mb += h.config.mem_mb;
    total.gpus += static_cast<double>(h.config.gpus.size());
  }
  return total;
}

DrfVector Scheduler::DemandOf(const JobRequest& job) const {
  DrfVector d;
  if (job.requirement.sections.empty()) {
    d.slots = job.slots;
    d.gpus = static_cast<double>(job.gpus_per_slot) * job.slots;
    return d;
  }
  for (const Section& s : job.requirement.sections) {
    const int slots = s.slots > 0 ? s.slots : job.slots;
    d.slots += slots;
    d.mem_mb += RusageOf(s, "mem") * slots;
    d.gpus += (RusageOf(s, "gpu") + job.gpus_per_slot) * slots;
  }
  return d;
}

DominantShare Scheduler::JobDominantShare(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {};
  return DominantShareOf(DemandOf(it->second.request), ClusterTotal());
}

const std::string& Scheduler::GroupOf(const std::string& user) const {
  for (const auto& [group, members] : user_groups_) {
    if (std::find(members.begin(), members.end(), user) != members.end()) return group;
  }
  return user;
}

std::vector<int64_t> Scheduler::DrfDispatchOrder(const Queue& queue) const {
  const DrfBy by = queue.config.drf;
  std::vector<DrfJob> pending;
  pending.reserve(queue.pending.size());
  for (int64_t id : queue.pending) {
    const JobRequest& r = jobs_.at(id).request;
    pending.push_back({id, by == DrfBy::kGroup ? GroupOf(r.user) : r.user, DemandOf(r)});
  }
  std::map<std::string, DrfVector> held;
  if (by != DrfBy::kJob) {
    for (const auto& [user, amount] : queue.held_by_user) held[by == DrfBy::kGroup ? GroupOf(user) : user] += amount;
  }
  return DrfOrder(pending, by, ClusterTotal(), std::move(held));
}

Scheduler::DispatchSequence Scheduler::DispatchOrder(const Queue& queue) const {
  DispatchSequence seq;
  if (queue.config.drf != DrfBy::kOff) {
    seq.ids = DrfDispatchOrder(queue);
    return seq;
  }
  if (queue.config.capacity) {
    seq.ids = CapacityDispatchOrder(queue);
    return seq;
  }
  if (queue.fairshare) {
    // The tree keeps the queue's pending jobs by user between cycles.
    seq.fairshare = queue.fairshare->Start(queue.used_by_user);
    return seq;
  }
  seq.ids = RoundRobinOrder(queue);
  return seq;
}

std::vector<int64_t> Scheduler::RoundRobinOrder(const Queue& queue) const {
  if (!queue.config.user_round_robin) return {queue.pending.begin(), queue.pending.end()};
  // Round robin: every user's first job, then every user's second job, and so on. Users
  // go in the order of their oldest waiting job, starting after the user served last, so
  // turns carry over from one cycle to the next.
  std::vector<std::string> users;
  std::unordered_map<std::string, std::vector<int64_t>> by_user;
  for (int64_t id : queue.pending) {
    const std::string& user = jobs_.at(id).request.user;
    auto& list = by_user[user];
    if (list.empty()) users.push_back(user);
    list.push_back(id);
  }
  auto last = std::find(users.begin(), users.end(), queue.last_dispatched_user);
  if (last != users.end()) std::rotate(users.begin(), last + 1, users.end());
  std::vector<int64_t> order;
  order.reserve(queue.pending.size());
  for (size_t round = 0; order.size() < queue.pending.size(); ++round) {
    for (const std::string& user : users) {
      const auto& list = by_user[user];
      if (round < list.size()) order.push_back(list[round]);
    }
  }
  return order;
}

}  // namespace jc::nexec
