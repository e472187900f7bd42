#pragma once

// The strategies of SPEC A9 that ship, one file each.

#include <memory>

#include "services/scheduler/scoring/scorer.h"
#include "services/scheduler/scoring/scorer_registry.h"

namespace jc::scheduler {

std::unique_ptr<Scorer> MakeLeastLoadScorer();
std::unique_ptr<Scorer> MakeSpecFreeCapacityScorer();
std::unique_ptr<Scorer> MakeDataTopologyAffinityScorer();
std::unique_ptr<Scorer> MakeLowestPriceScorer();
std::unique_ptr<Scorer> MakeLowestEnergyScorer();
std::unique_ptr<Scorer> MakeHighestPerformanceScorer();
std::unique_ptr<Scorer> MakeHighestSecurityScorer();
std::unique_ptr<Scorer> MakeLoadFairnessScorer();
std::unique_ptr<Scorer> MakeNetworkAwareScorer();
std::unique_ptr<Scorer> MakeDataAwareScorer();
std::unique_ptr<Scorer> MakeQosDeadlineScorer();
std::unique_ptr<Scorer> MakeExpectedCompletionScorer();
std::unique_ptr<Scorer> MakeGpuFragmentationScorer();

// Registers every strategy above, in this order.
void RegisterBuiltinScorers(ScorerRegistry& registry);

}  // namespace jc::scheduler
