// 6.6.2 e) lowest energy first, by formula 1:
//   E = P_static * (t_s - t_0) + P_exe * (t_e - t_s)
// static power while the missing data is copied in, execution power while the replica runs.
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/factors.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class LowestEnergy final : public ScorerBase {
 public:
  LowestEnergy()
      : ScorerBase({"lowest_energy",
                    "Centers where the replica would use less energy by formula 1 (static power during "
                    "data transfer + execution power during the run) score higher (6.6.2 e).",
                    "static_power_watts of the center; execution_power_watts of the spec there; size of "
                    "missing datasets and bandwidth; expected run time / performance factor",
                    false}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) {
      const CenterView& c = *ctx.centers[i];
      raw[i] = c.static_power_watts * ctx.facts[i].transfer_seconds +
               ctx.specs[i]->execution_power_watts * ctx.facts[i].run_seconds;
    }
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeLowestEnergyScorer() { return std::make_unique<LowestEnergy>(); }

}  // namespace jc::scheduler
