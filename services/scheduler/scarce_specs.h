#pragma once

// Capacity that few centers offer, kept for the specs that need it before their jobs wait
// (SPEC A16, issue 45; docs/placement-quality.md, "Session 53").
//
// A job that can run anywhere goes to the fastest free center, and on a federation whose
// fast centers are its scarce ones (two small H100 centers among T4s and A10s) it fills
// them: a job that can run only there arrives to find them busy with work of days and waits
// for it to end. Keeping a center only once such a job waits (PlacementRequest::
// kept_centers) comes too late for that. So every spec placed in the last day that few
// centers could ever run keeps those centers against replicas that could run at five times
// as many — a preference, after a waiting job's keep (a center no keep names must be able
// to start the replica now; nothing ever waits for it) — except for a replica bound to end
// within an hour there (its time limit, else its history's 90th percentile, after moving
// its data), which uses the fast center and leaves it soon, as backfill does, and at a
// center where the job's own replicas run (Placer::PreferUnkept).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

// A center kept for a scarce spec: how many centers could ever run it, and which it is
// (the narrowest spec placed lately that the center offers).
struct ScarceKeep {
  int breadth = 0;
  std::string spec_id;
};
// By center id; with the federation generation it was worked out for (a placer counts a
// replica's breadth once per generation: Placer::BreadthOf). A map with one more field, never
// deleted through the map.
struct ScarceCenters : absl::flat_hash_map<std::string, ScarceKeep> {
  uint64_t generation = 0;
};

// A replica gives way to a scarce spec's keep when it could run at this many times as many
// centers as the spec could (a job that names no GPU model, against the only H100s).
inline constexpr int kScarceBreadthRatio = 5;
// A replica bound to end within this at a kept center (its time limit, else its history's
// 90th percentile at the center's speed) may still take it.
inline constexpr absl::Duration kKeptCenterShortRun = absl::Hours(1);

class ScarceSpecs {
 public:
  // How long a spec placed stays kept for.
  static constexpr absl::Duration kWindow = absl::Hours(24);
  // The most specs remembered (the oldest goes first): specs are the centers' own, so a
  // federation has far fewer.
  static constexpr size_t kMaxSpecs = 4096;

  // At most this many specs kept by one project's jobs (the last to place each): past it
  // the project's oldest goes, so one project cannot keep every single-center spec.
  static constexpr int kMaxSpecsPerProject = 16;

  // A replica of `spec_id` of `project`'s job was placed at `now` (not one that names its
  // centers: that narrowness is its own choice, not a need; nor one that only waited and
  // could be cancelled unpaid).
  void Saw(const std::string& spec_id, const std::string& project, absl::Time now);
  // The centers kept now: for each spec placed within kWindow before `now` that at least
  // one and at most a fifth of the federation's available centers could ever run (filters.h
  // CentersThatCouldEverTake of the spec alone), its centers, each with the narrowest such
  // spec. Forgets the specs placed before the window. Never null.
  //
  // `generation` names the snapshot's centers, capacities and offers (free capacity does
  // not count): the answer is worked out again only when it changes, when a spec is asked
  // for the first time or forgotten, or one may have expired — the control plane's
  // generation moves with every refresh (a second by default), jc-sim's with outages.
  std::shared_ptr<const ScarceCenters> Centers(const Snapshot& snapshot, absl::Time now, uint64_t generation);
  void Clear() {
    seen_.clear();
    by_project_.clear();
    cached_.reset();
    ever_.clear();
  }
  size_t size() const { return seen_.size(); }

 private:
  struct Seen {
    absl::Time at;        // last placed
    std::string project;  // whose job that was
  };
  void Forget(absl::flat_hash_map<std::string, Seen>::iterator it);
  absl::flat_hash_map<std::string, Seen> seen_;        // by spec
  absl::flat_hash_map<std::string, int> by_project_;  // how many of seen_ each project's
  std::shared_ptr<const ScarceCenters> cached_;         // null: to work out
  uint64_t cached_generation_ = 0;
  absl::Time earliest_ = absl::InfiniteFuture();  // of seen_ when cached: when one may expire
  // Per spec, the centers that could ever run it (counted as far as makes it not scarce) in
  // generation ever_generation_: a spec placed again after it was forgotten, or another
  // project's spec pushing one out, costs no count while the federation stays the same.
  struct Ever {
    int breadth = 0;
    std::vector<int> centers;
    bool recount = false;  // a center passed by free capacity past its own: not kept
  };
  absl::flat_hash_map<std::string, Ever> ever_;
  uint64_t ever_generation_ = 0;
  uint64_t ever_stamp_ = 0;  // and on this snapshot as built (Snapshot::stamp)
};

}  // namespace jc::scheduler
