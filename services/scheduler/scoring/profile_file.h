#pragma once

// Weight profiles from a YAML file (SPEC A10), the built-in ones first:
//
//   profiles:
//     tuned:               # a new profile, or one replacing a built-in of that name
//       least_load: 2      # algorithm id: weight (>= 0); a strategy not listed weighs 0
//       lowest_price: 1
//     secure-first:        # with another evaluation model than the weighted sum
//       model: lexicographic
//       weights: {highest_security: 2, lowest_price: 1}
//
// `jc-sim tune --out` writes such a file; the server reads it with --weight_profiles and
// again whenever it changes.

#include <string>

#include "absl/status/statusor.h"
#include "services/scheduler/scoring/evaluation_model.h"
#include "services/scheduler/scoring/scorer_registry.h"

namespace jc::scheduler {

// The built-in profiles with the file's on top. InvalidArgument, naming the place, for a
// malformed file, an unknown algorithm id, a negative weight or (with `models`) an
// unknown evaluation model.
absl::StatusOr<WeightProfiles> ParseWeightProfiles(const std::string& yaml_text, const ScorerRegistry& registry,
                                                   const ModelRegistry* models = nullptr);
absl::StatusOr<WeightProfiles> LoadWeightProfiles(const std::string& path, const ScorerRegistry& registry,
                                                  const ModelRegistry* models = nullptr);

}  // namespace jc::scheduler
