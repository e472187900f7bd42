#include "executor/policy/capacity.h"

#include "executor/policy/queue_order.h"

#include <deque>
#include <functional>
#include <queue>
#include <tuple>

namespace jc::nexec {

const char* CapacityResourceName(CapacityResource resource) {
  return resource == CapacityResource::kGpus ? "gpu" : "slots";
}

namespace {

// (tier, relative use, cluster index): tier 0 below its guarantee, 1 at or beyond it,
// 2 no guarantee (relative use is then what it holds).
using Key = std::tuple<int, double, size_t>;

Key KeyOf(const VirtualClusterConfig& c, double held, size_t index) {
  if (c.guarantee <= 0) return {2, held, index};
  return {held < c.guarantee ? 0 : 1, held / c.guarantee, index};
}

}  // namespace

std::vector<CapacityPick> CapacityOrder(const std::vector<CapacityJob>& pending,
                                        const std::vector<VirtualClusterConfig>& clusters,
                                        std::vector<double> held) {
  held.resize(clusters.size(), 0);
  std::vector<std::deque<const CapacityJob*>> jobs_of(clusters.size());
  for (const CapacityJob& j : pending) {
    if (j.cluster < clusters.size()) jobs_of[j.cluster].push_back(&j);
  }
  std::priority_queue<Key, std::vector<Key>, std::greater<>> heap;
  for (size_t i = 0; i < clusters.size(); ++i) {
    if (!jobs_of[i].empty()) heap.push(KeyOf(clusters[i], held[i], i));
  }
  std::vector<CapacityPick> order;
  order.reserve(pending.size());
  while (!heap.empty()) {
    const size_t i = std::get<2>(heap.top());
    heap.pop();
    const CapacityJob* job = jobs_of[i].front();
    jobs_of[i].pop_front();
    const double guarantee = clusters[i].guarantee;
    order.push_back({job->id, guarantee > 0 && held[i] + job->demand <= guarantee});
    held[i] += job->demand;  // counted as held for the next pick
    if (!jobs_of[i].empty()) heap.push(KeyOf(clusters[i], held[i], i));
  }
  return order;
}

namespace {

// A capacity queue: jobs within their virtual cluster's guarantee first, then what may be
// lent beyond it (by the share tree where the queue has one, else in capacity order), and
// last the jobs of users in no cluster, to be told why they wait.
class CapacityQueueOrder final : public QueueOrder {
 public:
  CapacityQueueOrder(CapacityConfig capacity, std::shared_ptr<FairshareTree> tree)
      : capacity_(std::move(capacity)), tree_(std::move(tree)) {}
  const char* name() const override { return "capacity"; }
  std::unique_ptr<OrderSequence> Start(const OrderInputs& in) const override {
    std::vector<CapacityJob> pending;
    std::vector<int64_t> homeless;
    pending.reserve(in.pending->size());
    for (int64_t id : *in.pending) {
      const size_t cluster = in.cluster_of(id);
      if (cluster == kNoCluster) {
        homeless.push_back(id);
        continue;
      }
      const DrfVector demand = in.demand(in.request(id));
      pending.push_back({id, cluster, capacity_.resource == CapacityResource::kGpus ? demand.gpus : demand.slots});
    }
    std::vector<CapacityPick> picks = CapacityOrder(pending, capacity_.clusters, *in.capacity_held);
    std::vector<int64_t> order;
    order.reserve(in.pending->size());
    if (!tree_) {
      for (const CapacityPick& p : picks) order.push_back(p.id);
    } else {
      std::vector<FairshareTree::PendingJob> beyond;
      for (const CapacityPick& p : picks) {
        if (p.within_guarantee) {
          order.push_back(p.id);
          continue;
        }
        const JobRequest& r = in.request(p.id);
        beyond.push_back({p.id, r.user, r.slots});
      }
      for (int64_t id : tree_->Order(beyond, *in.used_by_user)) order.push_back(id);
    }
    order.insert(order.end(), homeless.begin(), homeless.end());
    return std::make_unique<ListSequence>(std::move(order));
  }

 private:
  CapacityConfig capacity_;
  std::shared_ptr<FairshareTree> tree_;
};

}  // namespace

std::unique_ptr<QueueOrder> MakeCapacityOrder(const CapacityConfig& capacity, std::shared_ptr<FairshareTree> tree) {
  return std::make_unique<CapacityQueueOrder>(capacity, std::move(tree));
}

}  // namespace jc::nexec
