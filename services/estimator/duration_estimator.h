#pragma once

// How long a job will run, learned from history (SPEC A16, issue 45; 3Sigma's idea: a
// distribution per job class, not a point). Every ended attempt is observed under five keys,
// most specific first:
//   this command of this name by this user   (project, user, name, command digest, spec)
//   this name by this user                   (project, user, name, spec)
//   this name in this project                (project, name, spec)
//   this command of this name by this user, any spec  (project, user, name, command digest)
//   this user's jobs of this spec            (project, user, spec)
// and an estimate comes from the most specific key with enough runs. Run times are kept in
// reference seconds (wall × the running center's performance factor), so one history serves
// every center: at a center of performance p the estimate is reference ÷ p. Memory is
// bounded: at most `max_keys` keys, the least recently observed dropped first, and at most
// a project's share of them per project (ProjectBound): a project whose jobs churn through
// names and commands evicts its own history, never another project's. Pure: the caller says
// when, and keeps the rows (Export/Import) where it likes.

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/estimator/duration_sketch.h"

namespace jc::estimator {

struct JobClass {
  std::string project;
  std::string user;
  std::string name;
  std::string command_digest;  // e.g. SHA-256 of the command line: same name, other program
  std::string spec;
};

struct EstimatorOptions {
  int64_t max_keys = 200000;
  // At most this many keys of one project (0: ProjectBound's default, a quarter of
  // `max_keys` but at least min(max_keys, 1024)): a project past it loses its own least
  // recently observed key, so one project's churn leaves the others' history alone.
  int64_t max_keys_per_project = 0;
  // Each new run of a key multiplies the weight of its earlier ones by this.
  double decay = 0.97;
  // A key answers once it has this many runs; a less specific one is asked before.
  int64_t min_runs = 2;
};

struct DurationEstimate {
  absl::Duration median;  // at the center asked about
  absl::Duration p90;     // the uncertainty: 9 runs in 10 were shorter
  int64_t runs = 0;       // how many runs it is learned from (0: the user's own figure)
  // Why, for the plan's explanation: "median of 37 runs of this name by this user: 42 min".
  std::string basis;
  // How long the scheduler counts on the job running (what shortest-expected-first ranks it
  // by, and expected completion's run time): the median, but for a one-off (the key "this
  // user's jobs of this spec" answers: none of the job's own name or command) the geometric
  // mean of median and p90 (a log-normal's 74th percentile). Measured in jc-sim
  // (docs/placement-quality.md, "Session 67"): a user's other jobs say less of this one's
  // length than its own name's runs, and a long one-off taken for the median of short ones
  // holds a center for hours ahead of jobs known to be short.
  absl::Duration assumed;
};

class DurationEstimator {
 public:
  // One key's row as a store keeps it: the key and its encoded sketch. In what Observe
  // returns, an empty sketch says the key was evicted: its row goes too.
  struct Row {
    std::string key;
    std::string sketch;
  };

  explicit DurationEstimator(EstimatorOptions options = {});

  // One attempt of `job` that ran `wall` at a center of performance factor `performance`
  // (1 = reference). Attempts that failed at once say little of a job's length: the caller
  // observes the ones that ran to an end (succeeded, or stopped by their time limit).
  // Returns the rows it changed (one per key of the job's, then one with an empty sketch
  // per key it evicted), for a caller that keeps them.
  std::vector<Row> Observe(const JobClass& job, absl::Duration wall, double performance);
  // The same, for a caller that keeps no rows (jc-sim): nothing encoded.
  void Learn(const JobClass& job, absl::Duration wall, double performance) {
    Record(job, wall, performance, nullptr);
  }

  // The estimate at a center of `performance`, from history; else from the user's own
  // `estimated` duration; else from its `time_limit` (an upper bound, said so); else none —
  // the job is then placed as if no estimate existed (an estimate never makes a job
  // unschedulable).
  std::optional<DurationEstimate> Estimate(const JobClass& job, double performance,
                                           std::optional<absl::Duration> estimated = std::nullopt,
                                           std::optional<absl::Duration> time_limit = std::nullopt) const;

  int64_t keys() const { return static_cast<int64_t>(index_.size()); }
  // How many keys `project` holds now, and at most.
  int64_t project_keys(const std::string& project) const;
  int64_t ProjectBound() const;
  // Rows Import could not read and left out (their keys start afresh).
  int64_t skipped() const { return skipped_; }

  // The rows to keep (key, encoded sketch), and loading them back (a restart).
  std::vector<Row> Export() const;
  absl::Status Import(const std::vector<Row>& rows);

 private:
  // Observe's work; the changed rows appended to `changed` when it is not null.
  void Record(const JobClass& job, absl::Duration wall, double performance, std::vector<Row>* changed);

  struct Entry;
  using Lru = std::list<Entry>;
  struct Entry {
    std::string key;
    std::string project;
    DurationSketch sketch;
    std::list<Lru::iterator>::iterator in_project;  // its place in its project's order
  };
  // Makes `key` the most recently observed (adding it with an empty sketch), evicting past
  // the bounds; the evicted keys are appended to `evicted`.
  Lru::iterator Touch(const std::string& key, std::vector<std::string>* evicted);
  void Evict(Lru::iterator it, std::vector<std::string>* evicted);

  EstimatorOptions options_;
  Lru lru_;  // most recently observed first
  std::unordered_map<std::string, Lru::iterator> index_;
  // Per project, its entries, most recently observed first.
  std::unordered_map<std::string, std::list<Lru::iterator>> projects_;
  int64_t skipped_ = 0;
};

// "42 min", "3.5 h", "50 s": a duration as the plan says it.
std::string DescribeDuration(absl::Duration d);

}  // namespace jc::estimator
