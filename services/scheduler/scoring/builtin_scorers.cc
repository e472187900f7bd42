#include "services/scheduler/scoring/builtin_scorers.h"

namespace jc::scheduler {

void RegisterBuiltinScorers(ScorerRegistry& registry) {
  for (auto make : {MakeLeastLoadScorer, MakeSpecFreeCapacityScorer, MakeDataTopologyAffinityScorer,
                    MakeLowestPriceScorer, MakeLowestEnergyScorer, MakeHighestPerformanceScorer,
                    MakeHighestSecurityScorer, MakeLoadFairnessScorer, MakeNetworkAwareScorer,
                    MakeDataAwareScorer, MakeQosDeadlineScorer, MakeExpectedCompletionScorer,
                    MakeGpuFragmentationScorer}) {
    // Built-in ids are distinct; a clash would be a programming error caught by the tests.
    registry.Register(make()).IgnoreError();
  }
}

}  // namespace jc::scheduler
