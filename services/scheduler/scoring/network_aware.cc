// Section 1 f 6) network-aware: bandwidth, latency, jitter and loss of the path to the
// center. Quality = bandwidth * (1 - loss) / (1 + (latency + 2 * jitter) / 100 ms):
// bandwidth counts as delivered, and every 100 ms of delay (jitter twice, as it stalls
// streams) halves it.
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class NetworkAware final : public ScorerBase {
 public:
  NetworkAware()
      : ScorerBase({"network",
                    "Centers with better network figures score higher: bandwidth * (1 - loss) / "
                    "(1 + (latency + 2 * jitter) / 100 ms) (section 1 f 6).",
                    "bandwidth_mbps, latency_ms, jitter_ms, loss_rate of the center", true}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) {
      const NetworkFigures& n = ctx.centers[i]->network;
      raw[i] = n.bandwidth_mbps * (1 - n.loss_rate) / (1 + (n.latency_ms + 2 * n.jitter_ms) / 100.0);
    }
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeNetworkAwareScorer() { return std::make_unique<NetworkAware>(); }

}  // namespace jc::scheduler
