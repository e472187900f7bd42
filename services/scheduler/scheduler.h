#pragma once

// The scheduler service's domain (standard 6.6, Appendix A.5–A.6): keeps the snapshot fresh
// from the other services, answers the per-algorithm and evaluation-model score queries,
// lists strategies and weight profiles, and plans jobs as a dry run with the full
// explanation. No gRPC types here.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/periodic_task.h"
#include "jointcloud/v1/scheduler.pb.h"
#include "services/scheduler/placer.h"
#include "services/scheduler/snapshot_builder.h"

namespace jc::scheduler {

// Where the scheduler's inputs come from: the registry, catalog and datamon (over gRPC in
// the server) and the monitor.
class InputsSource {
 public:
  virtual ~InputsSource() = default;
  virtual absl::StatusOr<SchedulerInputs> Fetch() = 0;
};

struct SchedulerOptions {
  absl::Duration refresh_interval = absl::Seconds(1);
  WeightProfiles profiles = WeightProfiles::Builtin();
};

class Scheduler {
 public:
  Scheduler(InputsSource* source, const Clock* clock, SchedulerOptions options);
  ~Scheduler();

  // Refreshes in a background thread every refresh_interval until Stop.
  void Start();
  void Stop();
  // Fetches the inputs and rebuilds the snapshot now.
  absl::Status Refresh();

  // A.5: the normalized score (0..100) one strategy gives a center among the available
  // centers offering `spec_id` (empty: each judged by its cheapest offer). NotFound for an
  // unknown algorithm or center; FailedPrecondition, with the reason, when the center is
  // not a candidate.
  absl::StatusOr<int> AlgorithmScore(const std::string& algorithm_id, const std::string& center_id,
                                     const std::string& spec_id);
  // A.6: formula 2 over the given scores with the profile's weights (empty: "default").
  absl::StatusOr<int> EvaluateScore(const std::string& center_id, const std::vector<std::string>& algorithm_ids,
                                    const std::vector<int>& scores, const std::string& profile);

  std::vector<v1::Algorithm> ListAlgorithms() const;
  std::vector<v1::WeightProfile> ListWeightProfiles() const;

  // Where the job would go now, and why; changes nothing.
  absl::StatusOr<v1::Placement> Plan(const v1::CreateTrainJobRequest& job);

  const ScorerRegistry& scorers() const { return scorers_; }

 private:
  InputsSource* source_;
  const Clock* clock_;
  SchedulerOptions options_;
  ScorerRegistry scorers_;
  WeightedSumModel model_;

  mutable std::mutex mu_;
  SchedulerInputs inputs_;
  Snapshot snapshot_;
  absl::Status last_refresh_ = absl::UnavailableError("the scheduler has not read its inputs yet");

  PeriodicTask loop_;
};

}  // namespace jc::scheduler
