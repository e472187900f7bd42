// 6.6.2 b) spec free first: the more replicas of the requested spec still fit, the higher.
#include <algorithm>

#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class SpecFreeCapacity final : public ScorerBase {
 public:
  SpecFreeCapacity()
      : ScorerBase({"spec_free_capacity",
                    "Centers where more replicas of the requested resource spec still fit score higher (6.6.2 b).",
                    "free resources (Table 4) less assumed reservations; the spec's resource_quantity (Table 3)",
                    true}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) {
      // Capped so that a spec asking for nothing does not flatten the others to 0.
      raw[i] = std::min(1e6, ctx.centers[i]->free.CopiesOf(ctx.specs[i]->quantity));
    }
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeSpecFreeCapacityScorer() { return std::make_unique<SpecFreeCapacity>(); }

}  // namespace jc::scheduler
