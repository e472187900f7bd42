#pragma once

// The arithmetic of the expected_completion strategy (SPEC A16), shared with tools that
// show the same figures (jc-sim, a plan's per-center start and finish).

#include <string>

#include "services/scheduler/scoring/scorer.h"

namespace jc::scheduler {

struct CompletionEstimate {
  double start_s = 0;   // from the request's `now` until the center can start the replica
  double finish_s = 0;  // from `now` until it is expected to end there
  // Where the start comes from, for the explanation: kept as figures, made into words by
  // Basis() (a decision scores every candidate with this and explains few of them).
  enum class From { kFreeCapacity, kQueueReport, kQueueLength } from = From::kFreeCapacity;
  int running = 0, waiting = 0;  // kQueueLength: the center's tasks running and waiting
  double slots = 0;              // kQueueLength: replicas of the spec its capacity holds at once
  std::string Basis() const;
};

// For ctx.centers[i]: start and finish of the replica there. Always finite.
CompletionEstimate EstimateCompletion(const ScoringContext& ctx, size_t i);

}  // namespace jc::scheduler
