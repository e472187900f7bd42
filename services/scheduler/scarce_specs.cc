#include "services/scheduler/scarce_specs.h"

#include <algorithm>
#include <vector>

#include "services/scheduler/filters.h"
#include "services/scheduler/placement_request.h"

namespace jc::scheduler {

void ScarceSpecs::Saw(const std::string& spec_id, absl::Time now) {
  auto it = seen_.find(spec_id);
  if (it != seen_.end()) {
    it->second = std::max(it->second, now);
    return;
  }
  if (seen_.size() >= kMaxSpecs) {
    auto oldest = std::min_element(seen_.begin(), seen_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    seen_.erase(oldest);
  }
  seen_.emplace(spec_id, now);
  cached_.reset();  // a spec asked for the first time (or another forgotten)
}

std::shared_ptr<const ScarceCenters> ScarceSpecs::Centers(const Snapshot& snapshot, absl::Time now,
                                                          uint64_t generation) {
  // A spec asked for again only moves its expiry later: the answer stands until the
  // federation changes, a new spec comes, or the oldest may have expired.
  if (cached_ != nullptr && cached_generation_ == generation && now - earliest_ <= kWindow) return cached_;
  auto out = std::make_shared<ScarceCenters>();
  earliest_ = absl::InfiniteFuture();
  const auto& centers = snapshot.centers();
  const int available = static_cast<int>(
      std::count_if(centers.begin(), centers.end(), [](const CenterView& c) { return c.available; }));
  for (auto it = seen_.begin(); it != seen_.end();) {
    if (now - it->second > kWindow) {
      seen_.erase(it++);
      continue;
    }
    // The spec alone: how scarce the capacity is, not what else one job of it asked for.
    PlacementRequest bare;
    bare.spec_id = it->first;
    bare.now = now;
    earliest_ = std::min(earliest_, it->second);
    const std::vector<int> ever = CentersThatCouldEverTake(bare, snapshot);
    const int breadth = static_cast<int>(ever.size());
    // No replica could run at five times as many centers as a broader spec: nothing would
    // give way to it.
    if (breadth > 0 && breadth * kScarceBreadthRatio <= available) {
      for (int c : ever) {
        auto [kept, added] = out->try_emplace(centers[c].id, ScarceKeep{breadth, it->first});
        if (!added && (breadth < kept->second.breadth ||
                       (breadth == kept->second.breadth && it->first < kept->second.spec_id))) {
          kept->second = ScarceKeep{breadth, it->first};
        }
      }
    }
    ++it;
  }
  cached_ = std::move(out);
  cached_generation_ = generation;
  return cached_;
}

}  // namespace jc::scheduler
