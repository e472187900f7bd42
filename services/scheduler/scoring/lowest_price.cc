// 6.6.2 d) lowest price first: the cheaper the requested spec at a center, the higher.
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class LowestPrice final : public ScorerBase {
 public:
  LowestPrice()
      : ScorerBase({"lowest_price", "Centers that charge less for the requested spec score higher (6.6.2 d).",
                    "price of the spec at each center (Table 3, spec x center map)", false}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) raw[i] = ctx.specs[i]->price;
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeLowestPriceScorer() { return std::make_unique<LowestPrice>(); }

}  // namespace jc::scheduler
