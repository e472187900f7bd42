#pragma once

// How long a job will run, learned from history (SPEC A16, issue 45; 3Sigma's idea: a
// distribution per job class, not a point). Every ended attempt is observed under four keys,
// most specific first:
//   this command of this name by this user   (project, user, name, command digest, spec)
//   this name by this user                   (project, user, name, spec)
//   this name in this project                (project, name, spec)
//   this user's jobs of this spec            (project, user, spec)
// and an estimate comes from the most specific key with enough runs. Run times are kept in
// reference seconds (wall × the running center's performance factor), so one history serves
// every center: at a center of performance p the estimate is reference ÷ p. Memory is
// bounded: at most `max_keys` keys, the least recently observed dropped first. Pure: the
// caller says when, and keeps the rows (Export/Import) where it likes.

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
};

class DurationEstimator {
 public:
  explicit DurationEstimator(EstimatorOptions options = {});

  // One attempt of `job` that ran `wall` at a center of performance factor `performance`
  // (1 = reference). Attempts that failed at once say little of a job's length: the caller
  // observes the ones that ran to an end (succeeded, or stopped by their time limit).
  void Observe(const JobClass& job, absl::Duration wall, double performance);

  // The estimate at a center of `performance`, from history; else from the user's own
  // `estimated` duration; else from its `time_limit` (an upper bound, said so); else none —
  // the job is then placed as if no estimate existed (an estimate never makes a job
  // unschedulable).
  std::optional<DurationEstimate> Estimate(const JobClass& job, double performance,
                                           std::optional<absl::Duration> estimated = std::nullopt,
                                           std::optional<absl::Duration> time_limit = std::nullopt) const;

  int64_t keys() const { return static_cast<int64_t>(index_.size()); }

  // The rows to keep (key, encoded sketch), and loading them back (a restart).
  struct Row {
    std::string key;
    std::string sketch;
  };
  std::vector<Row> Export() const;
  absl::Status Import(const std::vector<Row>& rows);

 private:
  struct Entry {
    std::string key;
    DurationSketch sketch;
  };
  void ObserveKey(const std::string& key, double reference_seconds);

  EstimatorOptions options_;
  std::list<Entry> lru_;  // most recently observed first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

// "42 min", "3.5 h", "50 s": a duration as the plan says it.
std::string DescribeDuration(absl::Duration d);

}  // namespace jc::estimator
