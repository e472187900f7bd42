// GPU fragmentation: the replica goes where it breaks the free accelerators up least, so
// wide replicas find whole blocks (gpu_fragmentation.h).
#include "services/scheduler/scoring/gpu_fragmentation.h"

#include <cmath>
#include <cstdint>
#include <iterator>

#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/scorer_base.h"

namespace jc::scheduler {

double UnusableAccelerators(double free) {
  const int64_t f = static_cast<int64_t>(std::floor(std::max(0.0, free)));
  int64_t sum = 0;
  // Powers of two: the remainder is a mask, not a division (a decision scores every
  // feasible center twice).
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
      raw[i] = need <= 0 ? 0 : UnusableAccelerators(free - need) - UnusableAccelerators(free);
    }
  }
  // No Explain: the score says it, and a note per center would be built for every kept
  // placement record (benchmarks.md: a third of the records' rate).
};

}  // namespace

std::unique_ptr<Scorer> MakeGpuFragmentationScorer() { return std::make_unique<GpuFragmentation>(); }

}  // namespace jc::scheduler
