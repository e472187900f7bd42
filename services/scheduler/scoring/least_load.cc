// 6.6.2 a) least load first: the fewer jobs a center runs and queues, the higher.
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class LeastLoad final : public ScorerBase {
 public:
  LeastLoad()
      : ScorerBase({"least_load", "Centers with fewer jobs running and waiting score higher (6.6.2 a).",
                    "running_task_num + waiting_task_num (Table 4) + replicas placed but not yet reported",
                    false}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) raw[i] = ctx.centers[i]->JobLoad();
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeLeastLoadScorer() { return std::make_unique<LeastLoad>(); }

}  // namespace jc::scheduler
