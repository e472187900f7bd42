// Capacity scheduling in the scheduler (the course's virtual clusters): what each cluster
// holds as reported, what holds a job back, and which jobs a cluster owed its guarantee
// reclaims (Preemptions::Among does it). Which cluster a job belongs to and what it holds
// are the model's (cluster_model_shares.cc); the policy's queue order is in capacity.cc.

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "executor/policy/scheduler.h"

namespace jc::nexec {

std::vector<Scheduler::ClusterReport> Scheduler::CapacityReport(const std::string& name) const {
  std::vector<ClusterReport> out;
  auto q = model_.queues.find(name);
  if (q == model_.queues.end() || !q->second.config.capacity) return out;
  const Queue& queue = q->second;
  for (size_t i = 0; i < queue.config.capacity->clusters.size(); ++i) {
    out.push_back({queue.config.capacity->clusters[i], i < queue.capacity_held.size() ? queue.capacity_held[i] : 0});
  }
  for (const auto& [id, job] : model_.jobs) {
    if (job.request.queue != name || job.cluster >= out.size()) continue;
    ++(job.running ? out[job.cluster].running_jobs : out[job.cluster].pending_jobs);
  }
  return out;
}

std::string Scheduler::CapacityExceeded(const Job& job, const Queue& queue) const {
  const CapacityConfig& capacity = *queue.config.capacity;
  const char* resource = CapacityResourceName(capacity.resource);
  if (job.cluster == kNoCluster) {
    return absl::StrCat("queue ", queue.config.name, ": user ", job.request.user, " is in no virtual cluster");
  }
  const VirtualClusterConfig& cluster = capacity.clusters[job.cluster];
  const double demand = model_.CapacityAmount(capacity, model_.DemandOf(job.request));
  const double held = queue.capacity_held[job.cluster];
  if (cluster.max > 0 && held + demand > cluster.max) {
    return absl::StrCat("virtual cluster ", cluster.name, ": max ", cluster.max, " ", resource, " (", held, " held, ",
                        demand, " asked)");
  }
  if (capacity.user_limit_factor > 0 && cluster.guarantee > 0) {
    const double limit = capacity.user_limit_factor * cluster.guarantee;
    auto it = queue.held_by_user.find(job.request.user);
    const double user_held = it == queue.held_by_user.end() ? 0 : model_.CapacityAmount(capacity, it->second);
    if (user_held + demand > limit) {
      return absl::StrCat("virtual cluster ", cluster.name, ": user limit ", limit, " ", resource, " (",
                          job.request.user, " holds ", user_held, ", ", demand, " asked)");
    }
  }
  return "";
}

bool Scheduler::TryReclaim(const Job& job, Queue& queue) {
  const CapacityConfig& capacity = *queue.config.capacity;
  if (job.cluster == kNoCluster) return false;
  const VirtualClusterConfig& own = capacity.clusters[job.cluster];
  const double demand = model_.CapacityAmount(capacity, model_.DemandOf(job.request));
  // Only what the cluster is owed: the job fits inside what is left of its guarantee.
  if (demand <= 0 || queue.capacity_held[job.cluster] + demand > own.guarantee) return false;
  if (preemptions_.WaitingForVictims(job.request.id)) return true;
  auto over = [&](const Job& v) {
    // Taking it leaves its cluster at or above its guarantee: no cluster is pushed under.
    const double amount = model_.HeldAmount(capacity, v);
    return amount > 0 && queue.capacity_held[v.cluster] - amount >= capacity.clusters[v.cluster].guarantee;
  };
  std::vector<std::pair<double, Job*>> ranked;  // (how far its cluster is over, job)
  for (int64_t rid : model_.running) {
    Job& v = model_.jobs.at(rid);
    if (v.request.queue != queue.config.name || v.cluster == kNoCluster || v.cluster == job.cluster) continue;
    if (v.suspended || v.lent || v.being_requeued) continue;
    if (queue.config.max_preemptions > 0 && v.request.preemptions >= queue.config.max_preemptions) continue;
    if (!over(v)) continue;
    const double guarantee = capacity.clusters[v.cluster].guarantee;
    const double held = queue.capacity_held[v.cluster];
    ranked.emplace_back(guarantee > 0 ? held / guarantee : std::numeric_limits<double>::infinity(), &v);
  }
  if (ranked.empty()) return false;
  // The cluster furthest beyond its guarantee first, and in it the youngest job.
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second->request.id > b.second->request.id;
  });
  std::vector<Job*> candidates;
  for (const auto& entry : ranked) {
    if (candidates.size() == 256) break;  // as Preemptions::ByQueue: enough to find room for one job
    candidates.push_back(entry.second);
  }
  return preemptions_.Among(job, queue, candidates, over,
                            absl::StrCat("virtual cluster ", own.name, " reclaims its guarantee"), now_);
}

}  // namespace jc::nexec
