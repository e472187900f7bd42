#include "executor/policy/capacity.h"

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

}  // namespace jc::nexec
