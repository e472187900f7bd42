#include "services/scheduler/scoring/evaluation_model.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"

namespace jc::scheduler {

int EvaluationModel::Compare(absl::Span<const int> a, absl::Span<const int> b, absl::Span<const double> weights) const {
  double x = Evaluate(a, weights), y = Evaluate(b, weights);
  return x > y ? 1 : x < y ? -1 : 0;
}

absl::string_view WeightedSumModel::description() const {
  return "formula 2: the weighted sum of the normalized scores; the highest wins";
}

namespace {

// The distinct positive weights, highest first: the priority classes.
std::vector<double> Classes(absl::Span<const double> weights) {
  std::vector<double> classes;
  for (double w : weights) {
    if (w > 0 && std::find(classes.begin(), classes.end(), w) == classes.end()) classes.push_back(w);
  }
  std::sort(classes.begin(), classes.end(), std::greater<double>());
  return classes;
}

double ClassSum(absl::Span<const int> scores, absl::Span<const double> weights, double cls) {
  double sum = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (weights[i] == cls) sum += scores[i];
  }
  return sum;
}

}  // namespace

absl::string_view LexicographicModel::description() const {
  return "priority classes by weight: the highest-weighted strategies decide, the next class only breaks ties";
}

double LexicographicModel::Evaluate(absl::Span<const int> scores, absl::Span<const double> weights) const {
  // Each class's sum is at most 100 x strategies: one digit in that base.
  const double base = 100.0 * scores.size() + 1;
  double total = 0;
  for (double cls : Classes(weights)) total = total * base + ClassSum(scores, weights, cls);
  return total;
}

int LexicographicModel::Compare(absl::Span<const int> a, absl::Span<const int> b,
                                absl::Span<const double> weights) const {
  for (double cls : Classes(weights)) {
    double x = ClassSum(a, weights, cls), y = ClassSum(b, weights, cls);
    if (x != y) return x > y ? 1 : -1;
  }
  return 0;
}

absl::string_view FirstFitModel::description() const {
  return "first fit: the first center in federation order that passes the filters; no scores count (the baseline)";
}

ModelRegistry::ModelRegistry() {
  models_.push_back(std::make_unique<WeightedSumModel>());
  models_.push_back(std::make_unique<LexicographicModel>());
  models_.push_back(std::make_unique<FirstFitModel>());
}

absl::Status ModelRegistry::Register(std::unique_ptr<EvaluationModel> model) {
  if (Find(model->name()) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("evaluation model \"", model->name(), "\" is already registered"));
  }
  models_.push_back(std::move(model));
  return absl::OkStatus();
}

const EvaluationModel* ModelRegistry::Find(absl::string_view name) const {
  for (const auto& m : models_) {
    if (m->name() == name) return m.get();
  }
  return nullptr;
}

std::vector<std::string> ModelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& m : models_) out.emplace_back(m->name());
  return out;
}

double WeightedSumModel::Evaluate(absl::Span<const int> scores, absl::Span<const double> weights) const {
  double total = 0;
  for (size_t i = 0; i < scores.size(); ++i) total += weights[i] * scores[i];
  return total;
}

WeightProfiles WeightProfiles::Builtin() {
  WeightProfiles p;
  // "default" is every registered strategy at 1 but kOutsideDefaultProfile (Resolve fills it in).
  p.profiles_["default"] = {};
  p.profiles_["balanced"] = {{"least_load", 2}, {"spec_free_capacity", 2}, {"load_fairness", 1},
                             {"data_aware", 1}, {"network", 1}};
  p.profiles_["cost"] = {{"lowest_price", 4}, {"lowest_energy", 2}, {"spec_free_capacity", 1}, {"least_load", 1}};
  p.profiles_["green"] = {{"lowest_energy", 4}, {"data_aware", 1}, {"least_load", 1}};
  p.profiles_["performance"] = {{"highest_performance", 4}, {"qos_deadline", 2}, {"network", 1},
                                {"least_load", 1}};
  p.profiles_["data"] = {{"data_aware", 4}, {"data_topology_affinity", 2}, {"network", 1}, {"least_load", 1}};
  p.profiles_["secure"] = {{"highest_security", 4}, {"least_load", 1}};
  // The default's strategies with expected completion on top (SPEC A16): a replica may wait
  // for a faster busy center when it is expected to finish there first
  // (docs/placement-quality.md, "Placement by expected completion"). Resolved from "default"
  // whatever it weighs then, so a strategy that joins the default joins this too.
  p.profiles_["completion"] = {{"expected_completion", 4}};
  p.on_default_.insert("completion");
  // The baseline: first fit, in federation order (no strategy counts; the model says so).
  p.profiles_["first_fit"] = {};
  p.models_["first_fit"] = "first_fit";
  return p;
}

absl::Status WeightProfiles::Set(const std::string& name, std::map<std::string, double> weights, std::string model) {
  for (const auto& [id, w] : weights) {
    if (w < 0) return absl::InvalidArgumentError(absl::StrCat("weight of ", id, " in profile ", name, " is negative"));
  }
  profiles_[name] = std::move(weights);
  on_default_.erase(name);  // what an operator sets is the whole profile
  if (model == kDefaultModel) {
    models_.erase(name);
  } else {
    models_[name] = std::move(model);
  }
  return absl::OkStatus();
}

const std::string& WeightProfiles::ModelOf(const std::string& profile) const {
  static const std::string* fallback = new std::string(kDefaultModel);
  auto it = models_.find(profile.empty() ? "default" : profile);
  return it == models_.end() ? *fallback : it->second;
}

absl::StatusOr<std::vector<double>> WeightProfiles::Resolve(const std::string& profile,
                                                            const std::map<std::string, double>& overrides,
                                                            const ScorerRegistry& registry) const {
  std::string name = profile.empty() ? "default" : profile;
  auto it = profiles_.find(name);
  if (it == profiles_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown weight profile: ", name));
  bool all_ones = name == "default" && it->second.empty();
  std::vector<double> weights(registry.size(), all_ones ? 1.0 : 0.0);
  if (all_ones) {
    for (const char* id : kOutsideDefaultProfile) {
      if (int i = registry.IndexOf(id); i >= 0) weights[i] = 0;
    }
  }
  if (name != "default" && on_default_.contains(name)) {
    auto base = Resolve("default", {}, registry);
    if (!base.ok()) return base.status();
    weights = *std::move(base);
  }
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
