// Section 1 f 8) QoS/QoE first: the replica's expected completion (data transfer + run at
// the center's performance + network latency) against its deadline. With a deadline the
// slack left counts (missing it scores lowest); without one, finishing sooner does.
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/factors.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class QosDeadline final : public ScorerBase {
 public:
  QosDeadline()
      : ScorerBase({"qos_deadline",
                    "Centers where the replica is expected to finish earliest before its deadline score "
                    "higher (section 1 f 8).",
                    "deadline of the job; expected run time / performance factor; missing data / "
                    "bandwidth; latency_ms",
                    true}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    const PlacementRequest& r = *ctx.request;
    bool has_deadline = r.deadline != absl::InfiniteFuture();
    double budget = has_deadline ? absl::ToDoubleSeconds(r.deadline - r.now) : 0;
    for (size_t i = 0; i < ctx.centers.size(); ++i) {
      const CenterView& c = *ctx.centers[i];
      double completion = ctx.facts[i].transfer_seconds + ctx.facts[i].run_seconds + c.network.latency_ms / 1000.0;
      raw[i] = budget - completion;  // slack; without a deadline, -completion ranks the same
    }
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeQosDeadlineScorer() { return std::make_unique<QosDeadline>(); }

}  // namespace jc::scheduler
