#include "services/scheduler/scarce_specs.h"

#include <algorithm>
#include <vector>

#include "services/scheduler/filters.h"
#include "services/scheduler/placement_request.h"

namespace jc::scheduler {

void ScarceSpecs::Forget(absl::flat_hash_map<std::string, Seen>::iterator it) {
  if (auto p = by_project_.find(it->second.project); p != by_project_.end() && --p->second <= 0) by_project_.erase(p);
  seen_.erase(it);
  cached_.reset();
}

void ScarceSpecs::Saw(const std::string& spec_id, const std::string& project, absl::Time now) {
  auto oldest_of = [&](const std::string* of) {
    auto oldest = seen_.end();
    for (auto it = seen_.begin(); it != seen_.end(); ++it) {
      if (of != nullptr && it->second.project != *of) continue;
      if (oldest == seen_.end() || it->second.at < oldest->second.at) oldest = it;
    }
    return oldest;
  };
  auto it = seen_.find(spec_id);
  if (it != seen_.end()) {
    // Placed again: a later expiry only, so the answer stands, whoever placed it.
    if (it->second.project != project) {
      if (by_project_[project] >= kMaxSpecsPerProject) {
        Forget(oldest_of(&project));  // never this spec: another project's until now
        it = seen_.find(spec_id);
      }
      if (auto p = by_project_.find(it->second.project); p != by_project_.end() && --p->second <= 0) {
        by_project_.erase(p);
      }
      it->second.project = project;
      ++by_project_[project];
    }
    it->second.at = std::max(it->second.at, now);
    return;
  }
  if (by_project_[project] >= kMaxSpecsPerProject) Forget(oldest_of(&project));
  if (seen_.size() >= kMaxSpecs) Forget(oldest_of(nullptr));
  seen_.emplace(spec_id, Seen{now, project});
  ++by_project_[project];
  cached_.reset();  // a spec placed the first time (or another forgotten)
}

std::shared_ptr<const ScarceCenters> ScarceSpecs::Centers(const Snapshot& snapshot, absl::Time now,
                                                          uint64_t generation) {
  // A spec placed again only moves its expiry later: the answer stands until the
  // federation changes, a new spec comes, or the oldest may have expired.
  if (cached_ != nullptr && cached_generation_ == generation && now - earliest_ <= kWindow) return cached_;
  auto out = std::make_shared<ScarceCenters>();
  const auto& centers = snapshot.centers();
  const int available = static_cast<int>(
      std::count_if(centers.begin(), centers.end(), [](const CenterView& c) { return c.available; }));
  out->generation = generation;
  // A spec is scarce when at most a fifth of the available centers could run it: counting
  // stops at one more.
  const int scarce_at_most = available / kScarceBreadthRatio;
  if (ever_generation_ != generation || ever_stamp_ != snapshot.stamp() || generation == 0 ||
      ever_.size() > 2 * kMaxSpecs) {
    ever_.clear();
    ever_generation_ = generation;
    ever_stamp_ = snapshot.stamp();
  }
  for (auto it = seen_.begin(); it != seen_.end();) {
    // A clock set back: what was seen "later" counts from now, not for the clock's error too.
    it->second.at = std::min(it->second.at, now);
    if (now - it->second.at > kWindow) {
      auto gone = it++;
      Forget(gone);
      continue;
    }
    // The spec alone: how scarce the capacity is, not what else one job of it asked for.
    auto [known, fresh] = ever_.try_emplace(it->first);
    const Ever& ever = known->second;
    if (fresh) {
      PlacementRequest bare;
      bare.spec_id = it->first;
      bare.now = now;
      bool free_beyond_capacity = false;
      known->second.breadth = CentersThatCouldEverTake(bare, snapshot, RequestKeys(bare), scarce_at_most + 1,
                                                       &known->second.centers, &free_beyond_capacity);
      // A center reporting more free than it has counts only while that is free: counted anew.
      known->second.recount = free_beyond_capacity;
    }
    const int breadth = ever.breadth;
    // No replica could run at five times as many centers as a broader spec: nothing would
    // give way to it.
    if (breadth > 0 && breadth <= scarce_at_most) {
      for (int c : ever.centers) {
        auto [kept, added] = out->try_emplace(centers[c].id, ScarceKeep{breadth, it->first});
        if (!added && (breadth < kept->second.breadth ||
                       (breadth == kept->second.breadth && it->first < kept->second.spec_id))) {
          kept->second = ScarceKeep{breadth, it->first};
        }
      }
    }
    if (ever.recount) ever_.erase(known);
    ++it;
  }
  earliest_ = absl::InfiniteFuture();
  for (const auto& [spec, seen] : seen_) earliest_ = std::min(earliest_, seen.at);
  cached_ = std::move(out);
  cached_generation_ = generation;
  return cached_;
}

}  // namespace jc::scheduler
