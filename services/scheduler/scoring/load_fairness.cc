// 6.6.2 h) load fairness: the center whose choice leaves the smallest variance of job
// load across all centers scores highest. With N centers, load sum S and sum of squares
// Q, one more job at a center with load l gives
//   variance = (Q + 2l + 1) / N - ((S + 1) / N)^2
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class LoadFairness final : public ScorerBase {
 public:
  LoadFairness()
      : ScorerBase({"load_fairness",
                    "Centers whose choice leaves the smallest variance of job load across all centers "
                    "score higher (6.6.2 h).",
                    "job load of every center (running + waiting + assumed)", false}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    double n = static_cast<double>(ctx.snapshot->centers().size());
    double s = ctx.snapshot->load_sum(), q = ctx.snapshot->load_sum_squares();
    double mean_after = (s + 1) / n;
    for (size_t i = 0; i < ctx.centers.size(); ++i) {
      double l = ctx.centers[i]->JobLoad();
      raw[i] = (q + 2 * l + 1) / n - mean_after * mean_after;
    }
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeLoadFairnessScorer() { return std::make_unique<LoadFairness>(); }

}  // namespace jc::scheduler
