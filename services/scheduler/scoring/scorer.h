#pragma once

// A scoring strategy (standard 6.6.2, SPEC A9): gives every candidate center a raw value
// for one replica; the framework normalizes the values over the candidate set to integer
// scores 0..100 (the best candidate 100). A new strategy is a class in its own file,
// registered by name; nothing else changes.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "services/scheduler/placement_request.h"
#include "services/scheduler/scoring/factors.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

// What a scorer sees for one decision. `centers[i]` passed every filter; `specs[i]` is the
// requested spec as that center offers it.
struct ScoringContext {
  const PlacementRequest* request = nullptr;
  const Snapshot* snapshot = nullptr;
  absl::Span<const CenterView* const> centers;
  absl::Span<const SpecAtCenter* const> specs;
  // Positions of the centers this job's other replicas use (data-topology affinity).
  absl::Span<const TopologyPath* const> sibling_topologies;
  // Per candidate: data to move, transfer and run time (factors.h), computed once.
  absl::Span<const CandidateFacts> facts;
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // The algorithm id of the REST API (/scheduler/algorithm/{algorithmId}/...).
  virtual absl::string_view id() const = 0;
  virtual absl::string_view description() const = 0;
  // The figures it reads, for the docs and ListAlgorithms.
  virtual absl::string_view inputs() const = 0;
  virtual bool higher_is_better() const = 0;
  // raw[i] for ctx.centers[i]; one call per decision, so a scorer loops itself.
  virtual void Score(const ScoringContext& ctx, absl::Span<double> raw) const = 0;
  // A sentence on what it found for ctx.centers[i] (expected_completion: the expected start
  // and finish there), shown beside the scores in a decision's explanation; empty: the
  // score says it all. Called only when a decision is explained.
  virtual std::string Explain(const ScoringContext& /*ctx*/, size_t /*i*/) const { return {}; }
};

// Min-max normalization to 0..100 with the best raw value at 100; when every candidate
// has the same value, every one gets 100.
void NormalizeScores(absl::Span<const double> raw, bool higher_is_better, absl::Span<int> scores);

}  // namespace jc::scheduler
