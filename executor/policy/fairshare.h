#pragma once

// Hierarchical fair share (SPEC B5; LSF's fairshare queues): a tree of share holders —
// departments, projects, users — with relative shares at each level. A user's dynamic
// priority, and every group's above it, is
//
//     shares / (1 + decayed usage + slots running now)
//
// where usage is slot-hours (a GPU counts `gpu_factor` slots) plus CPU hours times
// `cpu_time_factor`, decaying by half every `half_life`, as LSF's HIST_HOURS does. The queue serves the group with the highest
// priority at each level, down to a user, then that user's oldest job; each pick counts
// as running for the next one, so one cycle already spreads the slots by shares. Idle
// shares are lent: a group with nothing pending is skipped, and gets its turn back as
// soon as it submits (its low usage makes its priority high).

#include <deque>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace jc::nexec {

struct ShareNode {
  std::string name;  // a group's name, or a user's at a leaf; "default": each user not named
  double shares = 1;
  std::vector<ShareNode> children;  // empty: a user (or "default")
};

struct FairshareConfig {
  std::vector<ShareNode> tree;  // the root's children
  absl::Duration half_life = absl::Hours(5);
  double gpu_factor = 1;  // a GPU held counts as this many slots
  double cpu_time_factor = 0;  // an hour of CPU time the jobs used counts as this many slot-hours
  // Fair-share preemption: a job that does not fit may preempt running jobs of users whose
  // branch is further over its share than the job's own (see FairshareTree::MayPreempt).
  bool preemptive = false;
};

class FairshareTree {
 public:
  explicit FairshareTree(FairshareConfig config);

  // Decays the usage over `elapsed` and adds what ran meanwhile (user -> slots, GPUs).
  void Advance(absl::Duration elapsed, const std::map<std::string, std::pair<int, int>>& running);

  // CPU time a user's running job used since it was last counted (from heartbeats).
  void AddCpuTime(const std::string& user, double cpu_seconds);
  // Usage from before the master started (a job's record): `slots` and `gpus` held from
  // `start` to `end` and `cpu_seconds` used by `end`, decayed to `now` as if the tree had
  // been advancing all along.
  void AddPast(const std::string& user, int slots, int gpus, double cpu_seconds, absl::Time start, absl::Time end,
               absl::Time now);

  struct PendingJob {
    int64_t id;
    absl::string_view user;  // must outlive the order made from it
    int slots;
  };
  struct ListedJob {
    int64_t id;
    int slots;
    bool taken = false;  // given by a sequence and placed: leaves when the sequence ends
  };
  using JobList = std::deque<ListedJob>;  // FCFS
  // The queue's pending jobs, kept between cycles so a cycle does not sort them out again:
  // added when queued (in queue order), removed when cancelled, or when placed — told to
  // the sequence that gave them (Sequence::Taken), while their list is in the cache, and
  // dropped at its end (EndSequence).
  void AddPending(const std::string& user, int64_t id, int slots);
  void RemovePending(const std::string& user, int64_t id);
  size_t pending() const { return waiting_of_node_.empty() ? 0 : static_cast<size_t>(waiting_of_node_[0]); }
  // The dispatch order of `pending` (oldest first within a user), given what each user
  // runs now, computed pick by pick: a cycle that stops early (the cluster is full) pays
  // only for the picks it took, not for ordering every pending job.
  class Sequence {
   public:
    // The next job; false when every pending job has been given.
    bool Next(int64_t* id);
    // The job Next gave last was placed: it leaves the tree's pending jobs when the
    // sequence ends (FairshareTree::EndSequence). Only for a sequence over the kept jobs.
    void Taken();

   private:
    friend class FairshareTree;
    const FairshareTree* tree_ = nullptr;
    std::vector<JobList>* lists_ = nullptr;   // per leaf: the tree's, or owned_
    std::shared_ptr<std::vector<JobList>> owned_;  // lists made for one order
    int last_leaf_ = -1;  // whose list Next took from last
    std::vector<int> taken_leaves_;  // leaves with taken jobs, each once
    std::vector<int> taken_of_leaf_;
    std::vector<size_t> next_of_leaf_;
    std::vector<double> usage_, running_;
    std::vector<int> waiting_;
    // Per node, its children with work waiting, highest priority first (ties:
    // configuration order).
    std::vector<std::set<std::pair<double, int>>> ready_;
  };
  // The tree must not change while the sequence is used.
  Sequence Start(const std::vector<PendingJob>& pending, const std::map<std::string, int>& running);
  // The order of the kept pending jobs (AddPending): no work per pending job.
  Sequence Start(const std::map<std::string, int>& running);
  // The end of a sequence from Start(running): the jobs it was told were taken leave the
  // pending jobs, one pass per user with any (not a search per job).
  void EndSequence(Sequence& seq);
  // The whole order at once.
  std::vector<int64_t> Order(const std::vector<PendingJob>& pending, const std::map<std::string, int>& running);

  // Fair-share preemption: every node's usage and running slots now.
  struct Standing {
    std::vector<double> usage, running;
  };
  Standing Snapshot(const std::map<std::string, int>& running, const std::string& preemptor);
  // May a job of `preemptor` asking `slots` preempt a running job of `victim`? Where their
  // branches part (siblings under one parent), the preemptor's branch with the job added
  // must still have a higher priority than the victim's branch now: then the victim's
  // branch cannot preempt back (preemption never goes in circles).
  bool MayPreempt(const Standing& standing, const std::string& preemptor, int slots, const std::string& victim) const;
  // A user's own priority (its leaf's): victims are taken lowest first.
  double UserPriority(const Standing& standing, const std::string& user) const;
  // A running job taken as a victim: its slots leave its branch in `standing`.
  void Take(Standing& standing, const std::string& user, int slots) const;

  struct NodeReport {
    std::string path;  // "physics/alice"
    int depth = 0;
    double shares = 0;
    double share_fraction = 0;  // of the whole tree
    double usage = 0;           // decayed slot-hours of its subtree
    int running = 0;            // slots running in its subtree
    double priority = 0;
  };
  // Every node, depth first (the order `nexec shares` prints).
  std::vector<NodeReport> Report(const std::map<std::string, int>& running);

  // Usage by user, to carry over to a tree rebuilt by a reload.
  const std::map<std::string, double>& usage() const { return usage_; }
  void set_usage(std::map<std::string, double> usage) { usage_ = std::move(usage); }
  const FairshareConfig& config() const { return config_; }

 private:
  struct Node {
    std::string name;
    double shares = 1;
    int parent = -1;
    std::vector<int> children;
    bool user_leaf = false;
  };
  int Add(const ShareNode& n, int parent);
  // The leaf that stands for `user`: its own, or one made for it beside "default" (with
  // default's shares; at the root with 1 share when no default is configured).
  int LeafFor(const std::string& user);
  double Priority(int node, const std::vector<double>& usage, const std::vector<double>& running) const;
  // The common part of both Starts: per-node usage, running slots and the ready children.
  Sequence Begin(std::vector<JobList>* lists, std::shared_ptr<std::vector<JobList>> owned,
                 std::vector<int> waiting, const std::map<std::string, int>& running);

  FairshareConfig config_;
  std::vector<Node> nodes_;  // [0] is the root
  std::unordered_map<std::string, int> leaf_of_user_;
  int default_node_ = -1;
  std::map<std::string, double> usage_;  // decayed slot-hours by user
  std::vector<JobList> pending_of_leaf_;  // by node (leaves only hold jobs)
  std::vector<int> waiting_of_node_;      // kept pending jobs in each node's subtree
};

}  // namespace jc::nexec
