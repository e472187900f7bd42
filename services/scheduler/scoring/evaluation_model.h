#pragma once

// The evaluation model (standard 6.6.3) and its weights. The default model is formula 2,
// the weighted sum of the normalized scores; another model plugs in through the
// interface. Weights come from named profiles, overridden per job.

#include <map>
#include <memory>
#include <set>
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
  virtual absl::string_view description() const = 0;
  // A center's total (shown in explanations and answered by A.6). scores[i] and
  // weights[i] belong to the registry's i-th strategy.
  virtual double Evaluate(absl::Span<const int> scores, absl::Span<const double> weights) const = 0;
  // Whether the totals alone order the centers (the placer then compares numbers). A model
  // that needs more than one number says false and orders centers with Compare.
  virtual bool scalar() const { return true; }
  // > 0 when scores `a` beat `b`, < 0 when they lose, 0 on a tie. The default compares
  // the totals.
  virtual int Compare(absl::Span<const int> a, absl::Span<const int> b, absl::Span<const double> weights) const;
  // Whether, between centers it ties, the placer takes the less loaded one (true) or the
  // first in federation order (false: first fit).
  virtual bool breaks_ties_by_load() const { return true; }
};

// Formula 2: F_k = sum_i w_i * S_ik.
class WeightedSumModel final : public EvaluationModel {
 public:
  absl::string_view name() const override { return "weighted_sum"; }
  absl::string_view description() const override;
  double Evaluate(absl::Span<const int> scores, absl::Span<const double> weights) const override;
};

// Priority classes: the strategies with the highest weight decide (the sum of their
// scores); only on a tie there do the next-highest weight's strategies count, and so on.
// A weight's size says its class, not how much it counts: {highest_security: 2,
// lowest_price: 1} picks the cheapest of the most secure centers, however much cheaper a
// less secure one is. Weight 0 leaves a strategy out. The total is the class sums as
// digits of one number (exact up to five classes), so it orders as Compare does.
class LexicographicModel final : public EvaluationModel {
 public:
  absl::string_view name() const override { return "lexicographic"; }
  absl::string_view description() const override;
  double Evaluate(absl::Span<const int> scores, absl::Span<const double> weights) const override;
  bool scalar() const override { return false; }
  int Compare(absl::Span<const int> a, absl::Span<const int> b, absl::Span<const double> weights) const override;
};

// First fit, the baseline a scheduler is measured against: every center ties, and the
// placer takes the first in federation order that passes the filters (that can start the
// replica now, where the filters ask for free capacity). No scores count; the built-in
// "first_fit" profile uses it (docs/placement-quality.md, "Live").
class FirstFitModel final : public EvaluationModel {
 public:
  absl::string_view name() const override { return "first_fit"; }
  absl::string_view description() const override;
  double Evaluate(absl::Span<const int>, absl::Span<const double>) const override { return 0; }
  bool breaks_ties_by_load() const override { return false; }
};

// Models by name. A deployment registers its own beside the built-in ones.
class ModelRegistry {
 public:
  ModelRegistry();  // with weighted_sum, lexicographic and first_fit
  // AlreadyExists when the name is taken.
  absl::Status Register(std::unique_ptr<EvaluationModel> model);
  // Null when unknown.
  const EvaluationModel* Find(absl::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<std::unique_ptr<EvaluationModel>> models_;
};

inline constexpr char kDefaultModel[] = "weighted_sum";

// Strategies the built-in "default" profile weighs 0 although registered: placement by
// expected completion (SPEC A16) changes which centers win, and the default changes only
// when a measurement says so (docs/placement-quality.md); the "completion" profile uses it.
inline constexpr const char* kOutsideDefaultProfile[] = {"expected_completion"};

// Named weight profiles. "default" weighs every registered strategy 1 (but those of
// kOutsideDefaultProfile); "completion" is the default's with expected completion on top; the
// other built-in profiles favour one concern (their weights are in Builtin and the docs).
// A profile lists weights by algorithm id; a strategy it does not list weighs 0.
class WeightProfiles {
 public:
  static WeightProfiles Builtin();

  // Adds or replaces a profile, combined by `model` (a ModelRegistry name). InvalidArgument
  // for a negative weight.
  absl::Status Set(const std::string& name, std::map<std::string, double> weights,
                   std::string model = kDefaultModel);
  const std::map<std::string, std::map<std::string, double>>& profiles() const { return profiles_; }
  // The profile's model name (empty profile: "default"); kDefaultModel for an unknown one.
  const std::string& ModelOf(const std::string& profile) const;

  // The weights, aligned with `registry`, of `profile` (empty: "default") with
  // `overrides` on top. InvalidArgument for an unknown profile, an unknown algorithm id
  // or a negative weight.
  absl::StatusOr<std::vector<double>> Resolve(const std::string& profile,
                                              const std::map<std::string, double>& overrides,
                                              const ScorerRegistry& registry) const;

 private:
  std::map<std::string, std::map<std::string, double>> profiles_;
  std::map<std::string, std::string> models_;  // by profile; absent: kDefaultModel
  // Built-in profiles whose listed weights go on top of "default"'s as it is when resolved
  // ("completion"); one an operator sets is whole, as listed.
  std::set<std::string> on_default_;
};

}  // namespace jc::scheduler
