// 6.6.2 d) lowest price first: the less the replica will cost at a center, the higher.
// What it costs is the spec's price per hour times the hours the replica holds it there:
// the data transfer and the run at the center's performance. Scoring the hourly price
// alone sent work to slow cheap centers where it cost more in the end (jc-sim showed it:
// docs/placement-quality.md).
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class LowestPrice final : public ScorerBase {
 public:
  LowestPrice()
      : ScorerBase({"lowest_price",
                    "Centers where the replica will cost less score higher: the spec's price per hour times the "
                    "hours it is held there (data transfer, then the run at the center's performance) (6.6.2 d).",
                    "price of the spec at each center (Table 3, spec x center map); expected run time / "
                    "performance factor; size of missing datasets and bandwidth",
                    false}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) {
      raw[i] = ctx.specs[i]->price * (ctx.facts[i].transfer_seconds + ctx.facts[i].run_seconds);
    }
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeLowestPriceScorer() { return std::make_unique<LowestPrice>(); }

}  // namespace jc::scheduler
