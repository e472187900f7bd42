#include "executor/policy/fairshare.h"

#include "executor/policy/queue_order.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"

namespace jc::nexec {

FairshareTree::FairshareTree(FairshareConfig config) : config_(std::move(config)) {
  nodes_.push_back(Node{"", 1, -1, {}, false});
  pending_of_leaf_.resize(1);
  waiting_of_node_.resize(1);
  for (const ShareNode& n : config_.tree) Add(n, 0);
}

void FairshareTree::AddPending(const std::string& user, int64_t id, int slots) {
  const int leaf = LeafFor(user);
  pending_of_leaf_[leaf].push_back(ListedJob{id, slots});
  for (int i = leaf; i >= 0; i = nodes_[i].parent) ++waiting_of_node_[i];
}

void FairshareTree::RemovePending(const std::string& user, int64_t id) {
  auto leaf = leaf_of_user_.find(user);
  if (leaf == leaf_of_user_.end()) return;
  JobList& jobs = pending_of_leaf_[leaf->second];
  // Dispatched jobs are mostly a user's oldest: found near the front, erased cheaply there.
  auto it = std::find_if(jobs.begin(), jobs.end(), [id](const ListedJob& j) { return j.id == id; });
  if (it == jobs.end()) return;
  jobs.erase(it);
  for (int i = leaf->second; i >= 0; i = nodes_[i].parent) --waiting_of_node_[i];
}

int FairshareTree::Add(const ShareNode& n, int parent) {
  const int index = static_cast<int>(nodes_.size());
  nodes_.push_back(Node{n.name, n.shares, parent, {}, n.children.empty()});
  nodes_[parent].children.push_back(index);
  pending_of_leaf_.resize(nodes_.size());
  waiting_of_node_.resize(nodes_.size());
  if (n.children.empty()) {
    if (n.name == "default") {
      default_node_ = index;
      nodes_[index].user_leaf = false;  // stands for others; never a user itself
    } else {
      leaf_of_user_[n.name] = index;
    }
  }
  for (const ShareNode& c : n.children) Add(c, index);
  return index;
}

int FairshareTree::LeafFor(const std::string& user) {
  auto it = leaf_of_user_.find(user);
  if (it != leaf_of_user_.end()) return it->second;
  int parent = default_node_ >= 0 ? nodes_[default_node_].parent : 0;
  double shares = default_node_ >= 0 ? nodes_[default_node_].shares : 1;
  ShareNode leaf{user, shares, {}};
  int index = Add(leaf, parent);
  return index;
}

void FairshareTree::Advance(absl::Duration elapsed, const std::map<std::string, std::pair<int, int>>& running) {
  const double hours = absl::ToDoubleHours(elapsed);
  if (hours <= 0) return;
  const double decay = std::pow(0.5, hours / absl::ToDoubleHours(config_.half_life));
  for (auto& [user, u] : usage_) u *= decay;
  for (const auto& [user, held] : running) {
    usage_[user] += (held.first + config_.gpu_factor * held.second) * hours;
  }
}

void FairshareTree::AddCpuTime(const std::string& user, double cpu_seconds) {
  if (cpu_seconds > 0 && config_.cpu_time_factor > 0) usage_[user] += config_.cpu_time_factor * cpu_seconds / 3600;
}

void FairshareTree::AddPast(const std::string& user, int slots, int gpus, double cpu_seconds, absl::Time start,
                            absl::Time end, absl::Time now) {
  const double half_life = absl::ToDoubleHours(config_.half_life);
  auto weight = [&](absl::Time t) { return std::pow(0.5, std::max(0.0, absl::ToDoubleHours(now - t)) / half_life); };
  double add = 0;
  if (end > start) {
    // The integral of rate x 0.5^((now - t) / half_life) over [start, end], in hours.
    add += (slots + config_.gpu_factor * gpus) * half_life / std::log(2.0) * (weight(end) - weight(start));
  }
  if (cpu_seconds > 0) add += config_.cpu_time_factor * cpu_seconds / 3600 * weight(end);
  if (add > 0) usage_[user] += add;
}

double FairshareTree::Priority(int node, const std::vector<double>& usage, const std::vector<double>& running) const {
  return nodes_[node].shares / (1 + usage[node] + running[node]);
}

FairshareTree::Sequence FairshareTree::Start(const std::vector<PendingJob>& pending,
                                             const std::map<std::string, int>& running_slots) {
  // Per leaf: its users' jobs in FCFS order; per node: jobs waiting in its subtree.
  // Users come in runs (one user's jobs together, or few users): their leaf is looked up
  // once per run, not once per job.
  for (const auto& [user, n] : running_slots) LeafFor(user);
  auto owned = std::make_shared<std::vector<JobList>>();
  {
    absl::string_view last_user;
    int last_leaf = -1;
    for (const PendingJob& job : pending) {
      if (last_leaf < 0 || last_user != job.user) {
        last_user = job.user;
        last_leaf = LeafFor(std::string(job.user));
        if (static_cast<size_t>(last_leaf) >= owned->size()) owned->resize(last_leaf + 1);
      }
      (*owned)[last_leaf].push_back(ListedJob{job.id, job.slots});
    }
  }
  const size_t nodes = nodes_.size();  // LeafFor may have added leaves for new users
  owned->resize(nodes);
  std::vector<int> waiting(nodes, 0);
  for (size_t leaf = 0; leaf < nodes; ++leaf) {
    const int count = static_cast<int>((*owned)[leaf].size());
    if (count == 0) continue;
    for (int i = static_cast<int>(leaf); i >= 0; i = nodes_[i].parent) waiting[i] += count;
  }
  std::vector<JobList>* lists = owned.get();
  return Begin(lists, std::move(owned), std::move(waiting), running_slots);
}

FairshareTree::Sequence FairshareTree::Start(const std::map<std::string, int>& running_slots) {
  for (const auto& [user, n] : running_slots) LeafFor(user);  // may add leaves: sizes follow
  return Begin(&pending_of_leaf_, nullptr, waiting_of_node_, running_slots);
}

FairshareTree::Sequence FairshareTree::Begin(std::vector<JobList>* lists,
                                             std::shared_ptr<std::vector<JobList>> owned,
                                             std::vector<int> waiting,
                                             const std::map<std::string, int>& running_slots) {
  const size_t nodes = nodes_.size();
  Sequence seq;
  seq.tree_ = this;
  seq.lists_ = lists;
  seq.owned_ = std::move(owned);
  seq.usage_.assign(nodes, 0);
  seq.running_.assign(nodes, 0);
  seq.waiting_ = std::move(waiting);
  seq.next_of_leaf_.assign(nodes, 0);
  seq.taken_of_leaf_.assign(nodes, 0);
  seq.ready_.resize(nodes);
  auto up = [&](int leaf, auto&& f) {
    for (int i = leaf; i >= 0; i = nodes_[i].parent) f(i);
  };
  for (const auto& [user, u] : usage_) {
    auto it = leaf_of_user_.find(user);
    if (it != leaf_of_user_.end()) up(it->second, [&, amount = u](int i) { seq.usage_[i] += amount; });
  }
  for (const auto& [user, slots] : running_slots) {
    up(leaf_of_user_.at(user), [&, amount = slots](int i) { seq.running_[i] += amount; });
  }
  for (size_t i = 1; i < nodes; ++i) {
    if (seq.waiting_[i] > 0) {
      seq.ready_[nodes_[i].parent].emplace(-Priority(static_cast<int>(i), seq.usage_, seq.running_), static_cast<int>(i));
    }
  }
  return seq;
}

bool FairshareTree::Sequence::Next(int64_t* id) {
  if (tree_ == nullptr || waiting_.empty() || waiting_[0] <= 0) return false;
  const auto& nodes = tree_->nodes_;
  // A pick changes only the nodes on its path, so only they move: a pick costs depth x
  // log(children), not a look at every child of every level.
  auto key = [&](int c) { return std::make_pair(-tree_->Priority(c, usage_, running_), c); };
  int at = 0;
  while (!nodes[at].children.empty()) at = ready_[at].begin()->second;
  const auto [job, slots, taken] = (*lists_)[at][next_of_leaf_[at]++];
  last_leaf_ = at;
  for (int i = at; i > 0; i = nodes[i].parent) ready_[nodes[i].parent].erase(key(i));
  for (int i = at; i >= 0; i = nodes[i].parent) {
    waiting_[i] -= 1;
    running_[i] += slots;  // counted as running for the next pick
  }
  for (int i = at; i > 0; i = nodes[i].parent) {
    if (waiting_[i] > 0) ready_[nodes[i].parent].insert(key(i));
  }
  *id = job;
  return true;
}

void FairshareTree::Sequence::Taken() {
  if (last_leaf_ < 0) return;
  ListedJob& job = (*lists_)[last_leaf_][next_of_leaf_[last_leaf_] - 1];
  if (job.taken) return;
  job.taken = true;
  // A leaf's first taken job: remember the leaf for EndSequence.
  if (++taken_of_leaf_[last_leaf_] == 1) taken_leaves_.push_back(last_leaf_);
}

void FairshareTree::EndSequence(Sequence& seq) {
  if (seq.lists_ != &pending_of_leaf_) return;  // lists made for one order: nothing kept
  for (int leaf : seq.taken_leaves_) {
    JobList& jobs = pending_of_leaf_[leaf];
    // Taken jobs are among those given, the list's first next_of_leaf_[leaf].
    const auto given_end = jobs.begin() + static_cast<std::ptrdiff_t>(seq.next_of_leaf_[leaf]);
    const auto kept_end = std::remove_if(jobs.begin(), given_end, [](const ListedJob& j) { return j.taken; });
    const int removed = static_cast<int>(given_end - kept_end);
    jobs.erase(kept_end, given_end);
    for (int i = leaf; i >= 0; i = nodes_[i].parent) waiting_of_node_[i] -= removed;
  }
  seq.taken_leaves_.clear();
  seq.tree_ = nullptr;  // used up
}

std::vector<int64_t> FairshareTree::Order(const std::vector<PendingJob>& pending,
                                          const std::map<std::string, int>& running_slots) {
  Sequence seq = Start(pending, running_slots);
  std::vector<int64_t> order;
  order.reserve(pending.size());
  for (int64_t id = 0; seq.Next(&id);) order.push_back(id);
  return order;
}

FairshareTree::Standing FairshareTree::Snapshot(const std::map<std::string, int>& running,
                                                const std::string& preemptor) {
  for (const auto& [user, n] : running) LeafFor(user);
  LeafFor(preemptor);
  Standing st;
  st.usage.assign(nodes_.size(), 0);
  st.running.assign(nodes_.size(), 0);
  for (const auto& [user, u] : usage_) {
    auto it = leaf_of_user_.find(user);
    if (it == leaf_of_user_.end()) continue;
    for (int i = it->second; i >= 0; i = nodes_[i].parent) st.usage[i] += u;
  }
  for (const auto& [user, slots] : running) {
    for (int i = leaf_of_user_.at(user); i >= 0; i = nodes_[i].parent) st.running[i] += slots;
  }
  return st;
}

bool FairshareTree::MayPreempt(const Standing& st, const std::string& preemptor, int slots,
                               const std::string& victim) const {
  auto a = leaf_of_user_.find(preemptor);
  auto b = leaf_of_user_.find(victim);
  if (a == leaf_of_user_.end() || b == leaf_of_user_.end() || a->second == b->second) return false;
  auto path = [&](int leaf) {
    std::vector<int> p;
    for (int i = leaf; i >= 0; i = nodes_[i].parent) p.push_back(i);
    std::reverse(p.begin(), p.end());  // root first
    return p;
  };
  const std::vector<int> pa = path(a->second), pb = path(b->second);
  size_t k = 0;
  while (k < pa.size() && k < pb.size() && pa[k] == pb[k]) ++k;
  if (k >= pa.size() || k >= pb.size()) return false;
  const int A = pa[k], B = pb[k];
  const double with_job = nodes_[A].shares / (1 + st.usage[A] + st.running[A] + slots);
  return with_job > Priority(B, st.usage, st.running);
}

double FairshareTree::UserPriority(const Standing& st, const std::string& user) const {
  auto it = leaf_of_user_.find(user);
  return it == leaf_of_user_.end() ? 0 : Priority(it->second, st.usage, st.running);
}

void FairshareTree::Take(Standing& st, const std::string& user, int slots) const {
  auto it = leaf_of_user_.find(user);
  if (it == leaf_of_user_.end()) return;
  for (int i = it->second; i >= 0; i = nodes_[i].parent) st.running[i] -= slots;
}

std::vector<FairshareTree::NodeReport> FairshareTree::Report(const std::map<std::string, int>& running_slots) {
  for (const auto& [user, n] : running_slots) LeafFor(user);
  for (const auto& [user, u] : usage_) LeafFor(user);
  const size_t n = nodes_.size();
  std::vector<double> usage(n, 0), running(n, 0);
  for (const auto& [user, u] : usage_) {
    for (int i = leaf_of_user_.at(user); i >= 0; i = nodes_[i].parent) usage[i] += u;
  }
  for (const auto& [user, slots] : running_slots) {
    for (int i = leaf_of_user_.at(user); i >= 0; i = nodes_[i].parent) running[i] += slots;
  }
  std::vector<NodeReport> out;
  std::function<void(int, const std::string&, int, double)> walk = [&](int node, const std::string& path, int depth,
                                                                         double fraction) {
    // "default" only stands for the users not named; each of them has a node of its own.
    double total = 0;
    for (int c : nodes_[node].children) total += c == default_node_ ? 0 : nodes_[c].shares;
    for (int c : nodes_[node].children) {
      if (c == default_node_) continue;
      NodeReport r;
      r.path = path.empty() ? nodes_[c].name : absl::StrCat(path, "/", nodes_[c].name);
      r.depth = depth;
      r.shares = nodes_[c].shares;
      r.share_fraction = total > 0 ? fraction * nodes_[c].shares / total : 0;
      r.usage = usage[c];
      r.running = static_cast<int>(running[c]);
      r.priority = Priority(c, usage, running);
      out.push_back(r);
      walk(c, r.path, depth + 1, r.share_fraction);
    }
  };
  walk(0, "", 0, 1.0);
  return out;
}

namespace {

// A fair-share queue: the tree keeps its pending jobs by user between cycles, and each
// cycle takes them pick by pick, the user furthest under its share first.
class FairshareQueueOrder final : public QueueOrder {
 public:
  explicit FairshareQueueOrder(std::shared_ptr<FairshareTree> tree) : tree_(std::move(tree)) {}
  const char* name() const override { return "fairshare"; }
  void Added(const JobRequest& job) override { tree_->AddPending(job.user, job.id, job.slots); }
  void Removed(const JobRequest& job) override { tree_->RemovePending(job.user, job.id); }
  // Dispatched jobs were taken from the tree by the sequence that gave them (Taken).
  std::unique_ptr<OrderSequence> Start(const OrderInputs& in) const override {
    return std::make_unique<TreeSequence>(tree_, tree_->Start(*in.used_by_user));
  }

 private:
  class TreeSequence final : public OrderSequence {
   public:
    TreeSequence(std::shared_ptr<FairshareTree> tree, FairshareTree::Sequence seq)
        : tree_(std::move(tree)), seq_(std::move(seq)) {}
    // The cycle is over with this queue: what it placed leaves the tree.
    ~TreeSequence() override { tree_->EndSequence(seq_); }
    bool Next(int64_t* id) override { return seq_.Next(id); }
    void Taken() override { seq_.Taken(); }

   private:
    std::shared_ptr<FairshareTree> tree_;
    FairshareTree::Sequence seq_;
  };
  std::shared_ptr<FairshareTree> tree_;
};

}  // namespace

std::unique_ptr<QueueOrder> MakeFairshareOrder(std::shared_ptr<FairshareTree> tree) {
  return std::make_unique<FairshareQueueOrder>(std::move(tree));
}

}  // namespace jc::nexec
