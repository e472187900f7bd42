// 6.6.2 g) highest security grade first.
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class HighestSecurity final : public ScorerBase {
 public:
  HighestSecurity()
      : ScorerBase({"highest_security", "Centers with a higher security grade score higher (6.6.2 g).",
                    "security_grade (Table 4)", true}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) raw[i] = ctx.centers[i]->security_grade;
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeHighestSecurityScorer() { return std::make_unique<HighestSecurity>(); }

}  // namespace jc::scheduler
