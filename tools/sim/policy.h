#pragma once

// How jc-sim picks a center for a job: the real scheduler (the placer with a weight
// profile, or one strategy alone) or a baseline that uses only the scheduler's filters
// (first fit, random, round robin). Every policy sees the same snapshot and filters, so
// comparisons differ only in the choice among feasible centers.

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/scheduler/placer.h"
#include "services/scheduler/scoring/evaluation_model.h"
#include "services/scheduler/scoring/scorer_registry.h"

namespace jc::sim {

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // The snapshot index of the chosen center, or -1 when no center passes the filters.
  virtual int Choose(const scheduler::PlacementRequest& request, const scheduler::Snapshot& snapshot) = 0;
  // The policy may choose a center that cannot take the job now (its expected completion
  // there is still the soonest): the simulator then holds the job in the federation queue
  // for it (SPEC A16, "wait for the faster center"). True for the placer with a weight on
  // expected_completion.
  virtual bool waits_for_busy() const { return false; }
};

// The scorers and profiles policies are built from: the built-in strategies and profiles,
// plus profiles from a YAML file when given.
struct PolicyCatalog {
  scheduler::ScorerRegistry scorers;
  scheduler::WeightProfiles profiles = scheduler::WeightProfiles::Builtin();
  scheduler::ModelRegistry models;
  PolicyCatalog();
};

// Names a policy: "fcfs-first-fit" style names are not policies; these are:
//   first_fit | random | round_robin | profile:NAME | scorer:ID | weights:ID=W,ID=W
// `seed` drives `random`. InvalidArgument names what is unknown.
absl::StatusOr<std::unique_ptr<PlacementPolicy>> MakePolicy(const std::string& name, const PolicyCatalog& catalog,
                                                            uint64_t seed);

// The policies `jc-sim compare` runs by default: the baselines, each scorer alone, every
// weight profile.
std::vector<std::string> DefaultPolicies(const PolicyCatalog& catalog);

// The centers passing every filter, as the placer runs them: earlier failures (retry
// elsewhere) are ignored when they would leave nothing.
void FeasibleCenters(const scheduler::PlacementRequest& request, const scheduler::Snapshot& snapshot,
                     std::vector<int>* out);

}  // namespace jc::sim
