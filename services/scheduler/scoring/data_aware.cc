// Section 1 f 7) data-aware: move small data to the best center, move the job to large
// data. The less data would have to move to a center, the higher it scores; private
// data never moves (the private_data filter).
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/factors.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class DataAware final : public ScorerBase {
 public:
  DataAware()
      : ScorerBase({"data_aware",
                    "Centers that already hold more of the task's data, so that less must move, score "
                    "higher (section 1 f 7).",
                    "datasets the task reads, their size_mb and locations (Table 6)", false}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) raw[i] = ctx.facts[i].missing_mb;
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeDataAwareScorer() { return std::make_unique<DataAware>(); }

}  // namespace jc::scheduler
