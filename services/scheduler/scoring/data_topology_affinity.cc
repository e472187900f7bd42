// 6.6.2 c) data-topology affinity: for distributed jobs, centers logically close to the
// job's other replicas and to its data score higher.
#include "services/scheduler/scoring/builtin_scorers.h"
#include <algorithm>

#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {
namespace {

class DataTopologyAffinity final : public ScorerBase {
 public:
  DataTopologyAffinity()
      : ScorerBase({"data_topology_affinity",
                    "Centers whose logical position is close to the job's other replicas and to the "
                    "centers holding its data score higher (6.6.2 c).",
                    "network_topology of centers (Table 1) and of dataset locations (Table 6)", true}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) {
      const TopologyPath& here = ctx.centers[i]->topology_path;
      double sum = 0;
      int n = 0;
      for (const TopologyPath* t : ctx.sibling_topologies) {
        sum += TopologyAffinity(here, *t);
        ++n;
      }
      for (const auto& d : ctx.request->datasets) {
        // The nearest copy counts.
        double best = 0;
        for (const auto& t : d.locations) best = std::max(best, TopologyAffinity(here, t));
        sum += best;
        ++n;
      }
      raw[i] = n == 0 ? 0 : sum / n;
    }
  }
};

}  // namespace

std::unique_ptr<Scorer> MakeDataTopologyAffinityScorer() { return std::make_unique<DataTopologyAffinity>(); }

}  // namespace jc::scheduler
