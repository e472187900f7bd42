// What jobs ask and hold in the model's terms: a job's demand (DRF's vector), the cluster's
// total, a user's group, and capacity queues' virtual clusters with what each holds.

#include <algorithm>

#include "executor/policy/cluster_model.h"
#include "executor/policy/scheduler_internal.h"

namespace jc::nexec {

size_t ClusterModel::ClusterOf(const QueueConfig& queue, const std::string& user) const {
  if (!queue.capacity) return kNoCluster;
  const auto& clusters = queue.capacity->clusters;
  size_t fallback = kNoCluster;
  for (size_t i = 0; i < clusters.size(); ++i) {
    const std::string& name = clusters[i].name;
    if (name == user) return i;
    auto group = user_groups.find(name);
    if (group != user_groups.end() &&
        std::find(group->second.begin(), group->second.end(), user) != group->second.end()) {
      return i;
    }
    if (name == "default") fallback = i;
  }
  return fallback;
}

double ClusterModel::CapacityAmount(const CapacityConfig& capacity, const DrfVector& amount) {
  return capacity.resource == CapacityResource::kGpus ? amount.gpus : amount.slots;
}

double ClusterModel::HeldAmount(const CapacityConfig& capacity, const Job& job) {
  double held = 0;
  for (const auto& section : job.placement.sections) {
    for (const HostAllocation& a : section) {
      if (capacity.resource == CapacityResource::kGpus) {
        held += static_cast<double>(a.gpus.size());
      } else if (!job.lent) {  // a suspended victim lent its slots
        held += a.slots;
      }
    }
  }
  return held;
}

void ClusterModel::RecountCapacity(Queue& queue) {
  const auto& capacity = queue.config.capacity;
  queue.capacity_held.assign(capacity ? capacity->clusters.size() : 0, 0);
  for (auto& [id, job] : jobs) {
    if (job.request.queue != queue.config.name) continue;
    job.cluster = ClusterOf(queue.config, job.request.user);
    if (job.running && job.cluster != kNoCluster) queue.capacity_held[job.cluster] += HeldAmount(*capacity, job);
  }
}

DrfVector ClusterModel::ClusterTotal() const {
  DrfVector total;
  for (const Host& h : hosts) {
    if (h.state == HostState::kUnavailable) continue;
    total.slots += h.config.slots;
    total.mem_mb += h.config.mem_mb;
    total.gpus += static_cast<double>(h.config.gpus.size());
  }
  return total;
}

DrfVector ClusterModel::DemandOf(const JobRequest& job) const {
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

const std::string& ClusterModel::GroupOf(const std::string& user) const {
  for (const auto& [group, members] : user_groups) {
    if (std::find(members.begin(), members.end(), user) != members.end()) return group;
  }
  return user;
}

}  // namespace jc::nexec
