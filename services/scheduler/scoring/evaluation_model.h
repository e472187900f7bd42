#pragma once

// The evaluation model (standard 6.6.3) and its weights. The default model is formula 2,
// the weighted sum of the normalized scores; another model plugs in through the
// interface. Weights come from named profiles, overridden per job.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "services/scheduler/scoring/scorer_registry.h"

namespace jc::scheduler {

class EvaluationModel {
 public:
  virtual ~EvaluationModel() = default;
  virtual absl::string_view name() const = 0;
  // scores[i] and weights[i] belong to the registry's i-th strategy.
  virtual double Evaluate(absl::Span<const int> scores, absl::Span<const double> weights) const = 0;
};

// Formula 2: F_k = sum_i w_i * S_ik.
class WeightedSumModel final : public EvaluationModel {
 public:
  absl::string_view name() const override { return "weighted_sum"; }
  double Evaluate(absl::Span<const int> scores, absl::Span<const double> weights) const override;
};

// Named weight profiles. "default" weighs every registered strategy 1; the other built-in
// profiles favour one concern (their weights are in weight_profiles.cc and the docs).
// A profile lists weights by algorithm id; a strategy it does not list weighs 0.
class WeightProfiles {
 public:
  static WeightProfiles Builtin();

  // Adds or replaces a profile. InvalidArgument for a negative weight.
  absl::Status Set(const std::string& name, std::map<std::string, double> weights);
  const std::map<std::string, std::map<std::string, double>>& profiles() const { return profiles_; }

  // The weights, aligned with `registry`, of `profile` (empty: "default") with
  // `overrides` on top. InvalidArgument for an unknown profile, an unknown algorithm id
  // or a negative weight.
  absl::StatusOr<std::vector<double>> Resolve(const std::string& profile,
                                              const std::map<std::string, double>& overrides,
                                              const ScorerRegistry& registry) const;

 private:
  std::map<std::string, std::map<std::string, double>> profiles_;
};

}  // namespace jc::scheduler
