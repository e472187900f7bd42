#pragma once

// Queue orders (SPEC B5): the order a scheduling cycle offers a queue's pending jobs
// places in, one implementation per policy behind one interface — first come first served
// and round robin over users (queue_order.cc), hierarchical fair share (fairshare.cc),
// dominant resource fairness (drf.cc), capacity's virtual clusters (capacity.cc). An order
// keeps what it needs between cycles (round robin: whose turn it is; fair share: the
// pending jobs in its tree) and is told of the queue's changes; the scheduler asks it for
// a sequence at each cycle and knows nothing of the policy behind it. A new order is one
// class and one line in MakeQueueOrder.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/policy/cluster.h"

namespace jc::nexec {

// What an order may read of its queue and the cluster as a cycle starts.
struct OrderInputs {
  const std::deque<int64_t>* pending = nullptr;                    // FCFS, oldest first
  const std::map<std::string, int>* used_by_user = nullptr;        // slots running now
  const std::map<std::string, DrfVector>* held_by_user = nullptr;  // slots, memory, GPUs running now
  std::function<const JobRequest&(int64_t)> request;               // of a pending job
  std::function<DrfVector(const JobRequest&)> demand;              // what a job asks in all
  std::function<const std::string&(const std::string&)> group_of;  // a user's group (DRF per group)
  std::function<DrfVector()> cluster_total;                        // what the available hosts have
  // Capacity queues: a job's virtual cluster (kNoCluster: none) and what each holds now.
  std::function<size_t(int64_t)> cluster_of;
  const std::vector<double>* capacity_held = nullptr;
};

// The jobs of one cycle, one at a time: a sequence computed as it is taken costs a cycle
// that stops early (the cluster is full) only what it took.
class OrderSequence {
 public:
  virtual ~OrderSequence() = default;
  // The next job; false once every pending job was given.
  virtual bool Next(int64_t* id) = 0;
  // The job Next gave last was placed. An order that keeps its pending jobs between
  // cycles (fair share) forgets it here, while what it keeps of that job is still in the
  // cache, and not per job after the cycle; the order is changed when the sequence ends.
  virtual void Taken() {}
};

// A sequence over a list computed whole.
class ListSequence final : public OrderSequence {
 public:
  explicit ListSequence(std::vector<int64_t> ids) : ids_(std::move(ids)) {}
  bool Next(int64_t* id) override {
    if (next_ >= ids_.size()) return false;
    *id = ids_[next_++];
    return true;
  }

 private:
  std::vector<int64_t> ids_;
  size_t next_ = 0;
};

class QueueOrder {
 public:
  virtual ~QueueOrder() = default;
  // The policy's name, as `nexec queues` shows it.
  virtual const char* name() const = 0;
  // A job joined the queue's pending jobs (in FCFS order), or left them (cancelled).
  virtual void Added(const JobRequest& /*job*/) {}
  virtual void Removed(const JobRequest& /*job*/) {}
  // A job of the queue was dispatched this cycle (it has left the pending jobs), told
  // after the cycle's sequence ended and after OrderSequence::Taken.
  virtual void Dispatched(const JobRequest& /*job*/) {}
  // The order of this cycle. `in` is valid while the sequence is used.
  virtual std::unique_ptr<OrderSequence> Start(const OrderInputs& in) const = 0;
  // Made anew by a reload of the queue's configuration: takes over what `before` kept
  // that is still its to keep (round robin: whose turn it is).
  virtual void Continue(const QueueOrder& /*before*/) {}
};

// The queue's order, from its configuration: DRF where set, else capacity (its guarantees
// first, then fair share beyond them where the queue has a share tree), else fair share,
// else round robin over users, else FCFS. `tree` is the queue's share tree (null without
// fair share); the order keeps its pending jobs in it.
std::unique_ptr<QueueOrder> MakeQueueOrder(const QueueConfig& config, std::shared_ptr<FairshareTree> tree);

// The orders themselves (each in its policy's file), for tests and MakeQueueOrder.
std::unique_ptr<QueueOrder> MakeFcfsOrder();
std::unique_ptr<QueueOrder> MakeRoundRobinOrder();
std::unique_ptr<QueueOrder> MakeFairshareOrder(std::shared_ptr<FairshareTree> tree);
std::unique_ptr<QueueOrder> MakeDrfOrder(DrfBy by);
std::unique_ptr<QueueOrder> MakeCapacityOrder(const CapacityConfig& capacity, std::shared_ptr<FairshareTree> tree);

}  // namespace jc::nexec
