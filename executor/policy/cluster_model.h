#pragma once

// The executor scheduler's model of the cluster (issue 48, "the house"): hosts with what
// they hold, queues with their waiting jobs and per-user holdings, jobs, shared resource
// pools, the host indexes the placement walks, and the totals. Plain state with its own
// bookkeeping (the values select[] sees, consumables and their shared pools:
// cluster_model_resources.cc); the scheduler's cycle and its units (LimitBook, Backfill,
// and the policies in the scheduler_*.cc files) read and change it.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/time/time.h"
#include "executor/policy/capacity.h"
#include "executor/policy/cluster.h"
#include "executor/policy/fairshare.h"
#include "executor/policy/limit_book.h"
#include "executor/policy/queue_order.h"

namespace jc::nexec {

enum class HostState { kOk, kClosed, kUnavailable };

struct ClusterModel {
  struct Host {
    HostConfig config;
    double cpu_factor = 1.0;
    HostState state = HostState::kOk;
    int used_slots = 0;
    double used_mem = 0;
    std::map<int, int> gpu_users;  // index -> jobs using it
    int exclusive_jobs = 0;        // an exclusive job holds the host
    std::map<std::string, size_t> shared;  // resource -> pool index (shared resources)
    std::map<std::string, double> reserved;  // host-local consumables reserved
    std::map<std::string, std::map<int, int>> unit_users;  // assign resources: unit -> jobs
    ResourceValues values;         // what select[] sees, kept current
    int free_slots() const { return config.slots - used_slots; }
  };
  struct Queue {
    QueueConfig config;
    std::map<std::string, int> preference;  // host -> preference level
    std::deque<int64_t> pending;            // FCFS order
    int used_slots = 0;
    std::map<std::string, int> used_by_user;  // slots
    std::map<std::string, DrfVector> held_by_user;  // slots, memory, GPUs
    std::unique_ptr<QueueOrder> order;  // the order its pending jobs are offered in
    bool open = true;                  // false outside its run window
    std::shared_ptr<FairshareTree> fairshare;  // fair-share queues only
    std::vector<int64_t> lent;                 // preempted jobs lending their slots, oldest first
    std::vector<double> capacity_held;         // capacity queues: per virtual cluster
  };
  struct Job {
    JobRequest request;
    std::string shape;  // jobs of one shape succeed or fail alike within a cycle
    Placement placement;
    bool running = false;
    bool suspended = false;
    bool lent = false;          // suspended by preemption: its slots are lent to others
    int64_t lent_to = 0;        // the preemptor it waits for
    bool being_requeued = false;  // a preemption victim being requeued
    absl::Time started = absl::InfinitePast();
    size_t cluster = kNoCluster;  // its virtual cluster (capacity queues)
    // Sections of `placement` it started with; those after are what it grew by (elastic).
    size_t base_sections = 0;
    uint64_t placed_in_cycle = 0;  // grows from the cycle after (its tasks start first)
    int Slots() const;
    bool Grown() const { return placement.sections.size() > base_sections; }
    bool Resizable() const { return running && !suspended && !lent && !being_requeued; }
    // When it ends at the latest (start + run limit); infinite without a run limit.
    absl::Time Ends() const {
      return request.run_limit > absl::ZeroDuration() && started != absl::InfinitePast() ? started + request.run_limit
                                                                                        : absl::InfiniteFuture();
    }
  };
  // A consumable shared by hosts: one total and its reservations.
  struct Pool {
    std::string resource;
    std::vector<size_t> hosts;
    double total = 0;
    double reserved = 0;
    std::map<int, int> unit_users;
  };
  // Hosts ordered for packing (fewest free slots first) and spreading (most first), each
  // then by CPU factor (fastest first) and configuration order.
  using HostKey = std::tuple<int, double, size_t>;

  std::map<std::string, HostType> host_types;
  std::map<std::string, ResourceTraits> traits;  // by resource name (RESS fields)
  std::vector<Pool> pools;
  std::map<std::pair<std::string, std::string>, size_t> pool_index;  // (resource, scope) -> pools index
  std::vector<Host> hosts;  // stable: reserved in AddHost order
  std::unordered_map<std::string, size_t> host_index;
  std::map<std::string, Queue> queues;
  UserGroups user_groups;
  // Node-based (a Job stays where it is while others come and go), looked up once per
  // pick of every cycle: absl's probe finds the node in fewer cache misses than the
  // standard map's bucket chain.
  absl::node_hash_map<int64_t, Job> jobs;
  absl::flat_hash_set<int64_t> running;  // unordered: whoever walks it sorts by a unique key
  std::set<HostKey> pack_index;    // (free slots, -cpu factor, index)
  std::set<HostKey> spread_index;  // (-free slots, -cpu factor, index)
  int total_slots = 0;
  int largest_host_slots = 0;  // span[hosts=1] checks at submit: no walk over every host
  double largest_host_mem = 0;  // rusage[mem] per slot checks at submit, likewise

  // What a section's rusage[] asks of consumables besides mem and gpu.
  struct Consume {
    std::string resource;
    double amount = 0;  // per slot, or per job
    ResourceTraits traits;
  };
  std::vector<Consume> ConsumesOf(const Section& section) const;
  // The free amount of a consumable on a host (its pool's when shared), and the units
  // free of an assign resource; 0 when the host does not have it.
  double FreeOf(const Host& h, const Consume& c) const;
  // Reserves (sign +1) or gives back (-1) one allocation's consumables; `only_released`
  // touches just the resources a suspension releases. Refreshes the values select[] sees.
  void ApplyConsumables(const HostAllocation& a, int sign, bool only_released);
  // The pool of a shared resource (made empty the first time), by (resource, scope).
  size_t PoolFor(const std::string& name, const std::string& scope);
  // Makes `host` a member of pool `index`; reservations its jobs made of its own value of
  // the resource move to the pool.
  void JoinPool(size_t index, size_t host);
  // What select[] and order[] see of a host, made again from its configuration and holdings.
  void RefreshValues(Host& host);
  // Only what placements change (free slots, memory, GPUs); RefreshValues otherwise.
  void RefreshLoad(Host& host);

  // What a job asks for in all: slots, memory, GPUs (DRF's demand); the cluster's total of
  // them (available hosts); the user's group for DRF per group (the first group naming the
  // user; the user if none). cluster_model_shares.cc.
  DrfVector DemandOf(const JobRequest& job) const;
  DrfVector ClusterTotal() const;
  const std::string& GroupOf(const std::string& user) const;
  // Capacity queues: the virtual cluster of a user in a queue, the amount of the queue's
  // capacity resource a demand or a running job counts, and every job's cluster and every
  // cluster's holding counted again.
  size_t ClusterOf(const QueueConfig& queue, const std::string& user) const;
  static double CapacityAmount(const CapacityConfig& capacity, const DrfVector& amount);
  static double HeldAmount(const CapacityConfig& capacity, const Job& job);
  void RecountCapacity(Queue& queue);

  // Adds (`insert`) or removes host `index` in the packing and spreading indexes, by its
  // free slots now: a change of its free slots is a removal before and an insert after.
  void IndexHost(size_t index, bool insert);
  // The host of that name; null when there is none.
  const Host* FindHost(const std::string& name) const;
};

}  // namespace jc::nexec
