// The plain queue orders — first come first served, and round robin over users — and the
// choice of a queue's order from its configuration (queue_order.h).

#include "executor/policy/queue_order.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace jc::nexec {
namespace {

class FcfsOrder final : public QueueOrder {
 public:
  const char* name() const override { return "fcfs"; }
  std::unique_ptr<OrderSequence> Start(const OrderInputs& in) const override {
    return std::make_unique<ListSequence>(std::vector<int64_t>(in.pending->begin(), in.pending->end()));
  }
};

// Every user's first job, then every user's second job, and so on. Users go in the order
// of their oldest waiting job, starting after the user served last, so turns carry over
// from one cycle to the next.
class RoundRobinOrder final : public QueueOrder {
 public:
  const char* name() const override { return "round_robin"; }
  void Dispatched(const JobRequest& job) override { last_user_ = job.user; }
  void Continue(const QueueOrder& before) override {
    if (const auto* same = dynamic_cast<const RoundRobinOrder*>(&before)) last_user_ = same->last_user_;
  }
  std::unique_ptr<OrderSequence> Start(const OrderInputs& in) const override {
    const std::deque<int64_t>& pending = *in.pending;
    std::vector<std::string> users;
    std::unordered_map<std::string, std::vector<int64_t>> by_user;
    for (int64_t id : pending) {
      const std::string& user = in.request(id).user;
      auto& list = by_user[user];
      if (list.empty()) users.push_back(user);
      list.push_back(id);
    }
    auto last = std::find(users.begin(), users.end(), last_user_);
    if (last != users.end()) std::rotate(users.begin(), last + 1, users.end());
    std::vector<int64_t> order;
    order.reserve(pending.size());
    for (size_t round = 0; order.size() < pending.size(); ++round) {
      for (const std::string& user : users) {
        const auto& list = by_user[user];
        if (round < list.size()) order.push_back(list[round]);
      }
    }
    return std::make_unique<ListSequence>(std::move(order));
  }

 private:
  std::string last_user_;  // the next cycle starts after this user
};

}  // namespace

std::unique_ptr<QueueOrder> MakeFcfsOrder() { return std::make_unique<FcfsOrder>(); }
std::unique_ptr<QueueOrder> MakeRoundRobinOrder() { return std::make_unique<RoundRobinOrder>(); }

std::unique_ptr<QueueOrder> MakeQueueOrder(const QueueConfig& config, std::shared_ptr<FairshareTree> tree) {
  if (config.drf != DrfBy::kOff) return MakeDrfOrder(config.drf);
  if (config.capacity) return MakeCapacityOrder(*config.capacity, std::move(tree));
  if (tree) return MakeFairshareOrder(std::move(tree));
  if (config.user_round_robin) return MakeRoundRobinOrder();
  return MakeFcfsOrder();
}

}  // namespace jc::nexec
