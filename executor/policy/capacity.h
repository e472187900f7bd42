#pragma once

// Capacity scheduling (the scheduling course's virtual clusters; YARN's Capacity
// Scheduler): a queue is shared by groups, each a virtual cluster with a guaranteed
// capacity that it may always have, and bonus capacity beyond it — what the others leave
// idle, lent up to the group's maximum and taken back by preemption when an owner needs
// its guarantee. A user limit factor keeps one user from taking a whole group's share.
//
// Amounts are in one resource per queue: slots, or GPUs (a deep-learning cluster's
// scarce resource, the course's setting).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace jc::nexec {

enum class CapacityResource { kSlots, kGpus };

struct VirtualClusterConfig {
  std::string name;      // a user group or a user; "default": the queue's other users
  double guarantee = 0;  // always available: what others borrow of it is reclaimed
  double max = 0;        // the most it may hold, guarantee plus bonus; 0: no cap
};

struct CapacityConfig {
  CapacityResource resource = CapacityResource::kSlots;
  // One user holds at most this times its cluster's guarantee (YARN's
  // user-limit-factor); 0: no per-user limit.
  double user_limit_factor = 0;
  std::vector<VirtualClusterConfig> clusters;
};

const char* CapacityResourceName(CapacityResource resource);

inline constexpr size_t kNoCluster = std::numeric_limits<size_t>::max();

struct CapacityJob {
  int64_t id = 0;
  size_t cluster = kNoCluster;  // index into CapacityConfig::clusters
  double demand = 0;            // of the queue's capacity resource
};

struct CapacityPick {
  int64_t id = 0;
  // At its turn its cluster held less than its guarantee, and this job fits in what is
  // left of it: a job the cluster is owed (it may reclaim).
  bool within_guarantee = false;
};

// The order jobs are offered places, by progressive filling over clusters: the cluster
// furthest below its guarantee (least held relative to it) offers its oldest job next, and
// that job counts as held. So clusters under their guarantee go first, and what is lent
// beyond the guarantees is split in proportion to them. Clusters with no guarantee come
// last, least held first. `pending` is in FCFS order; jobs in no cluster are left out.
std::vector<CapacityPick> CapacityOrder(const std::vector<CapacityJob>& pending,
                                        const std::vector<VirtualClusterConfig>& clusters,
                                        std::vector<double> held);

}  // namespace jc::nexec
