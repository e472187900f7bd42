#include "services/scheduler/scoring/evaluation_model.h"

#include "absl/strings/str_cat.h"

namespace jc::scheduler {

double WeightedSumModel::Evaluate(absl::Span<const int> scores, absl::Span<const double> weights) const {
  double total = 0;
  for (size_t i = 0; i < scores.size(); ++i) total += weights[i] * scores[i];
  return total;
}

WeightProfiles WeightProfiles::Builtin() {
  WeightProfiles p;
  // "default" is every registered strategy at 1 (Resolve fills it in).
  p.profiles_["default"] = {};
  p.profiles_["balanced"] = {{"least_load", 2}, {"spec_free_capacity", 2}, {"load_fairness", 1},
                             {"data_aware", 1}, {"network", 1}};
  p.profiles_["cost"] = {{"lowest_price", 4}, {"lowest_energy", 2}, {"spec_free_capacity", 1}, {"least_load", 1}};
  p.profiles_["green"] = {{"lowest_energy", 4}, {"data_aware", 1}, {"least_load", 1}};
  p.profiles_["performance"] = {{"highest_performance", 4}, {"qos_deadline", 2}, {"network", 1},
                                {"least_load", 1}};
  p.profiles_["data"] = {{"data_aware", 4}, {"data_topology_affinity", 2}, {"network", 1}, {"least_load", 1}};
  p.profiles_["secure"] = {{"highest_security", 4}, {"least_load", 1}};
  return p;
}

absl::Status WeightProfiles::Set(const std::string& name, std::map<std::string, double> weights) {
  for (const auto& [id, w] : weights) {
    if (w < 0) return absl::InvalidArgumentError(absl::StrCat("weight of ", id, " in profile ", name, " is negative"));
  }
  profiles_[name] = std::move(weights);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> WeightProfiles::Resolve(const std::string& profile,
                                                            const std::map<std::string, double>& overrides,
                                                            const ScorerRegistry& registry) const {
  std::string name = profile.empty() ? "default" : profile;
  auto it = profiles_.find(name);
  if (it == profiles_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown weight profile: ", name));
  bool all_ones = name == "default" && it->second.empty();
  std::vector<double> weights(registry.size(), all_ones ? 1.0 : 0.0);
  auto apply = [&](const std::map<std::string, double>& ws) -> absl::Status {
    for (const auto& [id, w] : ws) {
      int i = registry.IndexOf(id);
      if (i < 0) return absl::InvalidArgumentError(absl::StrCat("unknown scoring algorithm in weights: ", id));
      if (w < 0) return absl::InvalidArgumentError(absl::StrCat("weight of ", id, " is negative"));
      weights[i] = w;
    }
    return absl::OkStatus();
  };
  if (absl::Status s = apply(it->second); !s.ok()) return s;
  if (absl::Status s = apply(overrides); !s.ok()) return s;
  return weights;
}

}  // namespace jc::scheduler
