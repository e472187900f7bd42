#include "tools/sim/policy.h"

#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/scheduler/filters.h"
#include "services/scheduler/scoring/builtin_scorers.h"

namespace jc::sim {
namespace {

using scheduler::PlacementRequest;
using scheduler::Snapshot;

// The real scheduler: filter, score, evaluate, select, with fixed weights.
class PlacerPolicy final : public PlacementPolicy {
 public:
  PlacerPolicy(const PolicyCatalog& catalog, std::vector<double> weights, const scheduler::EvaluationModel& model)
      : placer_(catalog.scorers, model), weights_(std::move(weights)) {
    int i = catalog.scorers.IndexOf("expected_completion");
    waits_ = i >= 0 && weights_[i] > 0;
  }
  int Choose(const PlacementRequest& request, const Snapshot& snapshot) override {
    return placer_.Place(request, snapshot, weights_).center;
  }
  bool waits_for_busy() const override { return waits_; }

 private:
  scheduler::Placer placer_;
  std::vector<double> weights_;
  bool waits_ = false;
};

class FirstFit final : public PlacementPolicy {
 public:
  int Choose(const PlacementRequest& request, const Snapshot& snapshot) override {
    FeasibleCenters(request, snapshot, &feasible_);
    return feasible_.empty() ? -1 : feasible_.front();
  }

 private:
  std::vector<int> feasible_;
};

class RandomFit final : public PlacementPolicy {
 public:
  explicit RandomFit(uint64_t seed) : rng_(seed) {}
  int Choose(const PlacementRequest& request, const Snapshot& snapshot) override {
    FeasibleCenters(request, snapshot, &feasible_);
    if (feasible_.empty()) return -1;
    return feasible_[rng_() % feasible_.size()];
  }

 private:
  std::mt19937_64 rng_;
  std::vector<int> feasible_;
};

// The next feasible center after the one chosen last, in federation order.
class RoundRobin final : public PlacementPolicy {
 public:
  int Choose(const PlacementRequest& request, const Snapshot& snapshot) override {
    FeasibleCenters(request, snapshot, &feasible_);
    if (feasible_.empty()) return -1;
    int chosen = feasible_.front();
    for (int i : feasible_) {
      if (i > last_) {
        chosen = i;
        break;
      }
    }
    last_ = chosen;
    return chosen;
  }

 private:
  int last_ = -1;
  std::vector<int> feasible_;
};

}  // namespace

PolicyCatalog::PolicyCatalog() { scheduler::RegisterBuiltinScorers(scorers); }

void FeasibleCenters(const PlacementRequest& request, const Snapshot& snapshot, std::vector<int>* out) {
  const scheduler::RequestKeys keys(request);
  const auto& centers = snapshot.centers();
  for (bool ignore_avoid : {false, true}) {
    out->clear();
    bool avoided = false;
    for (size_t i = 0; i < centers.size(); ++i) {
      const char* failed = scheduler::FilterCenter(request, centers[i], ignore_avoid, nullptr, nullptr, &keys);
      if (failed == nullptr) {
        out->push_back(static_cast<int>(i));
      } else {
        avoided |= failed == scheduler::kFilterAvoid;
      }
    }
    if (!out->empty() || !avoided) return;
  }
}

absl::StatusOr<std::unique_ptr<PlacementPolicy>> MakePolicy(const std::string& name, const PolicyCatalog& catalog,
                                                            uint64_t seed) {
  if (name == "first_fit") return std::make_unique<FirstFit>();
  if (name == "random") return std::make_unique<RandomFit>(seed);
  if (name == "round_robin") return std::make_unique<RoundRobin>();
  std::map<std::string, double> overrides;
  std::string profile;
  absl::string_view rest = name;
  if (absl::ConsumePrefix(&rest, "profile:")) {
    profile = std::string(rest);
  } else if (absl::ConsumePrefix(&rest, "scorer:")) {
    if (catalog.scorers.IndexOf(rest) < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unknown scoring algorithm \"", rest, "\""));
    }
    // One strategy alone: every other weighs 0 (a profile with one entry).
    profile = "__none__";
    overrides[std::string(rest)] = 1;
  } else if (absl::ConsumePrefix(&rest, "weights:")) {
    profile = "__none__";
    for (absl::string_view item : absl::StrSplit(rest, ',', absl::SkipWhitespace())) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
      double w = 0;
      if (!absl::SimpleAtod(kv.second, &w)) {
        return absl::InvalidArgumentError(absl::StrCat("weights: \"", item, "\" is not ID=NUMBER"));
      }
      overrides[std::string(absl::StripAsciiWhitespace(kv.first))] = w;
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown policy \"", name, "\" (first_fit, random, round_robin, profile:NAME, scorer:ID, weights:ID=W,...)"));
  }
  scheduler::WeightProfiles profiles = catalog.profiles;
  if (profile == "__none__") (void)profiles.Set(profile, {});
  absl::StatusOr<std::vector<double>> weights = profiles.Resolve(profile, overrides, catalog.scorers);
  if (!weights.ok()) return weights.status();
  const scheduler::EvaluationModel* model = catalog.models.Find(profiles.ModelOf(profile));
  if (model == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("profile \"", profile, "\" names unknown evaluation model \"",
                                                   profiles.ModelOf(profile), "\""));
  }
  return std::make_unique<PlacerPolicy>(catalog, std::move(*weights), *model);
}

std::vector<std::string> DefaultPolicies(const PolicyCatalog& catalog) {
  std::vector<std::string> names = {"first_fit", "random", "round_robin"};
  for (const auto& s : catalog.scorers.scorers()) names.push_back(absl::StrCat("scorer:", s->id()));
  for (const auto& [name, weights] : catalog.profiles.profiles()) {
    if (catalog.profiles.ModelOf(name) == "first_fit") continue;  // "first_fit" itself, listed first
    names.push_back(absl::StrCat("profile:", name));
  }
  return names;
}

}  // namespace jc::sim
