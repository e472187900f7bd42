#include "executor/policy/drf.h"

#include "executor/policy/queue_order.h"

#include <algorithm>
#include <deque>
#include <queue>
#include <tuple>
#include <unordered_map>

namespace jc::nexec {

DominantShare DominantShareOf(const DrfVector& amount, const DrfVector& total) {
  DominantShare out;
  auto consider = [&](double a, double t, const char* name) {
    if (t <= 0) return;
    if (a / t > out.share) out = {a / t, name};
  };
  consider(amount.gpus, total.gpus, "gpu");
  consider(amount.slots, total.slots, "slots");
  consider(amount.mem_mb, total.mem_mb, "mem");
  return out;
}

std::vector<int64_t> DrfOrder(const std::vector<DrfJob>& pending, DrfBy by, const DrfVector& total,
                              std::map<std::string, DrfVector> held) {
  std::vector<int64_t> order;
  order.reserve(pending.size());
  if (by == DrfBy::kJob) {
    std::vector<std::pair<double, size_t>> keyed;
    keyed.reserve(pending.size());
    for (size_t i = 0; i < pending.size(); ++i) keyed.emplace_back(DominantShareOf(pending[i].demand, total).share, i);
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [share, i] : keyed) order.push_back(pending[i].id);
    return order;
  }
  // Progressive filling: a heap of (dominant share held, first arrival, consumer).
  std::unordered_map<std::string, std::deque<const DrfJob*>> jobs_of;
  std::vector<std::string> arrival;
  for (const DrfJob& j : pending) {
    auto& list = jobs_of[j.consumer];
    if (list.empty()) arrival.push_back(j.consumer);
    list.push_back(&j);
  }
  using Entry = std::tuple<double, size_t, const std::string*>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (size_t i = 0; i < arrival.size(); ++i) {
    heap.emplace(DominantShareOf(held[arrival[i]], total).share, i, &arrival[i]);
  }
  while (!heap.empty()) {
    auto [share, rank, consumer] = heap.top();
    heap.pop();
    auto& list = jobs_of[*consumer];
    const DrfJob* job = list.front();
    list.pop_front();
    order.push_back(job->id);
    DrfVector& h = held[*consumer];
    h += job->demand;  // counted as held for the next pick
    if (!list.empty()) heap.emplace(DominantShareOf(h, total).share, rank, consumer);
  }
  return order;
}

namespace {

// A queue ordered by dominant resource fairness: per job, per user or per user group, from
// what each consumer runs now.
class DrfQueueOrder final : public QueueOrder {
 public:
  explicit DrfQueueOrder(DrfBy by) : by_(by) {}
  const char* name() const override { return "drf"; }
  std::unique_ptr<OrderSequence> Start(const OrderInputs& in) const override {
    std::vector<DrfJob> pending;
    pending.reserve(in.pending->size());
    for (int64_t id : *in.pending) {
      const JobRequest& r = in.request(id);
      pending.push_back({id, by_ == DrfBy::kGroup ? in.group_of(r.user) : r.user, in.demand(r)});
    }
    std::map<std::string, DrfVector> held;
    if (by_ != DrfBy::kJob) {
      for (const auto& [user, amount] : *in.held_by_user) held[by_ == DrfBy::kGroup ? in.group_of(user) : user] += amount;
    }
    return std::make_unique<ListSequence>(DrfOrder(pending, by_, in.cluster_total(), std::move(held)));
  }

 private:
  DrfBy by_;
};

}  // namespace

std::unique_ptr<QueueOrder> MakeDrfOrder(DrfBy by) { return std::make_unique<DrfQueueOrder>(by); }

}  // namespace jc::nexec
