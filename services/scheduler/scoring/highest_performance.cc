// 6.6.2 f) highest compute performance first.
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class HighestPerformance final : public ScorerBase {
 public:
  HighestPerformance()
      : ScorerBase({"highest_performance", "Centers with higher compute performance score higher (6.6.2 f).",
                    "performance_factor of the center (1 = reference hardware)", true}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) raw[i] = ctx.centers[i]->performance_factor;
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeHighestPerformanceScorer() { return std::make_unique<HighestPerformance>(); }

}  // namespace jc::scheduler
