// GPU fragmentation: the replica goes where it breaks the free accelerators up least, so
// wide replicas find whole blocks (gpu_fragmentation.h).
#include "services/scheduler/scoring/gpu_fragmentation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <utility>

#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {

double UnusableAccelerators(double free) {
  // Whole accelerators; a fraction short of one (0.1-GPU specs summed) is that one, and a
  // figure no center has (a bad report, infinity) is capped before the cast.
  const double whole = std::floor(std::min(1e12, std::max(0.0, free)) + 1e-9);
  const int64_t f = static_cast<int64_t>(whole);
  int64_t sum = 0;
  // Powers of two: the remainder is a mask, not a division (a decision calls this twice
  // for every feasible center).
  for (int64_t k : kWiderReplicaSizes) sum += f < k ? f : (f & (k - 1));
  return static_cast<double>(sum) / std::size(kWiderReplicaSizes);
}

namespace {

// The accelerators the replica asks for and the center has free, of the first kind it
// asks for (a replica asks for one kind); {0, 0} for a replica of CPUs only.
std::pair<double, double> Accelerators(const Resources& need, const Resources& free) {
  if (need.gpu > 0) return {need.gpu, free.gpu};
  if (need.npu > 0) return {need.npu, free.npu};
  if (need.mlu > 0) return {need.mlu, free.mlu};
  return {0, 0};
}

class GpuFragmentation final : public ScorerBase {
 public:
  GpuFragmentation()
      : ScorerBase({"gpu_fragmentation",
                    "Centers where the replica leaves the free accelerators least broken up for replicas of 2 to 32 "
                    "score higher, so wide replicas find whole blocks (fragmentation gradient descent).",
                    "free resources (Table 4) less assumed reservations; the spec's resource_quantity (Table 3)",
                    false}) {}
  void Score(const ScoringContext& ctx, absl::Span<double> raw) const override {
    for (size_t i = 0; i < ctx.centers.size(); ++i) {
      const auto [need, free] = Accelerators(ctx.specs[i]->quantity, ctx.centers[i]->free);
      // A busy center (the "completion" profile weighs them) takes nothing now: the replica
      // waits there, so this placement breaks no block up and mends none, whatever is free.
      raw[i] = need <= 0 || free < need ? 0 : UnusableAccelerators(free - need) - UnusableAccelerators(free);
    }
  }
  // No Explain: the score says it, and a note per center would be built for every kept
  // placement record (benchmarks.md: a third of the records' rate).
};

}  // namespace

std::unique_ptr<Scorer> MakeGpuFragmentationScorer() { return std::make_unique<GpuFragmentation>(); }

}  // namespace jc::scheduler
