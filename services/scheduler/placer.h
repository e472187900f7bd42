#pragma once

// One scheduling decision (standard Figure 6): filter -> score -> evaluate -> select, for
// one replica or for every replica of a job (gang: all or none). Reads only the
// in-memory snapshot. Optionally explains itself: for every center, the filter that
// removed it, or each strategy's normalized score, its weight and the total.

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "jointcloud/v1/scheduler.pb.h"
#include "services/scheduler/placement_record.h"
#include "services/scheduler/placement_request.h"
#include "services/scheduler/scoring/evaluation_model.h"
#include "services/scheduler/scoring/scorer_registry.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

struct ReplicaDecision {
  int center = -1;  // index into the snapshot; -1 when nothing fits
  double total = 0;
  std::string reason;  // when nothing fits: how many centers each filter removed
  // The chosen center's free capacity holds the spec now. False only for a request that
  // considers busy centers (PlacementRequest::consider_busy_centers) and chose one: the
  // caller holds the replica for it rather than starting it.
  bool fits_now = true;
};

struct JobDecision {
  bool placed = false;  // every replica has a center
  std::string reason;
  std::vector<int> centers;  // per replica, in request order; -1 = waits
};

class Placer {
 public:
  Placer(const ScorerRegistry& scorers, const EvaluationModel& model) : scorers_(scorers), model_(model) {}

  // Time spent in each strategy (registry order) since construction, estimated from one
  // decision in kTimingSample.
  static constexpr int kTimingSample = 16;
  const std::vector<int64_t>& scorer_nanos() const { return scorer_nanos_; }
  // Candidates a keep took off (PreferUnkept) since construction: whether a gang that did
  // not fit may fit without keeps.
  uint64_t kept_off() const { return kept_off_; }

  // Not thread-safe: a placer reuses its buffers from one decision to the next. `model`
  // (null: the placer's own) combines the scores, as the weight profile names it. With
  // `explain`, the decision's explanation as numbers (ToProto makes the protobuf): every
  // center is then visited; without, only those the snapshot's indexes name.
  ReplicaDecision Decide(const PlacementRequest& request, const Snapshot& snapshot, absl::Span<const double> weights,
                         ReplicaRecord* explain, const EvaluationModel* model = nullptr);
  // Decide, with the explanation as the API gives it.
  ReplicaDecision Place(const PlacementRequest& request, const Snapshot& snapshot,
                        absl::Span<const double> weights, jointcloud::v1::ReplicaPlacement* explain = nullptr,
                        const EvaluationModel* model = nullptr);

  // Places the replicas in order, reserving each placed one in `snapshot` so the next
  // sees it. With `gang`, when one cannot be placed none is (their reservations are
  // undone), and the gang is tried again with its narrowest replicas first (those the
  // fewest centers could ever take). Without, the ones placed keep their reservations and
  // the rest wait.
  JobDecision DecideJob(absl::Span<const PlacementRequest> replicas, Snapshot& snapshot,
                        absl::Span<const double> weights, bool gang, PlacementRecord* explain,
                        const EvaluationModel* model = nullptr);
  // DecideJob, with the explanation as the API gives it.
  JobDecision PlaceJob(absl::Span<const PlacementRequest> replicas, Snapshot& snapshot,
                       absl::Span<const double> weights, bool gang, jointcloud::v1::Placement* explain = nullptr,
                       const EvaluationModel* model = nullptr);

 private:
  // PlaceJob's replicas in `order` (indices into `replicas`).
  JobDecision PlaceJobInOrder(absl::Span<const PlacementRequest> replicas, const std::vector<size_t>& order,
                              Snapshot& snapshot, absl::Span<const double> weights, bool gang,
                              PlacementRecord* explain, const EvaluationModel* model);
  // One more center removed by `filter`, for NothingFits.
  void CountRemoved(const char* filter);
  // Drops the candidates kept for narrower waiting jobs (PlacementRequest::kept_centers)
  // or for scarce specs placed lately (scarce_centers) when another candidate can start
  // the replica now; one bound to end within kKeptCenterShortRun may take a scarce spec's.
  void PreferUnkept(const PlacementRequest& request, const RequestKeys& keys, const Snapshot& snapshot, bool explain);
  // How many centers could ever take the request (CentersThatCouldEverTake), counted as far
  // as `limit` or beyond: a plain request's (no pins, ports, image or private data) is
  // counted once per spec, project, user and grade for the generation its scarce_centers
  // were worked out in, on one snapshot as built (not where a center reports more free
  // than it has: a reservation there changes the count).
  int BreadthOf(const PlacementRequest& request, const RequestKeys& keys, const Snapshot& snapshot, int limit);

  const ScorerRegistry& scorers_;
  const EvaluationModel& model_;
  std::vector<int> kept_;
  std::vector<const ScarceKeep*> scarce_;
  std::vector<const char*> failed_;  // per center: the filter that removed it (a decision that visits all)
  std::vector<int> pinned_;          // CandidateCenters' list of pinned centers
  std::vector<std::string> reasons_;
  std::vector<std::pair<const char*, int>> removed_by_;
  std::vector<CandidateFacts> facts_;
  std::vector<const CenterView*> candidates_;
  std::vector<const SpecAtCenter*> specs_;
  std::vector<double> raw_;
  std::vector<int> column_;
  std::vector<int> scores_;  // [candidate * scorers + scorer]
  std::vector<const TopologyPath*> sibling_topologies_;
  std::vector<int64_t> scorer_nanos_;
  ReplicaRecord shown_;  // Place's record of the decision it explains, its room kept
  uint64_t decisions_ = 0;
  uint64_t kept_off_ = 0;
  // BreadthOf's memo, and the generation and snapshot it was counted in.
  static constexpr size_t kMaxBreadthShapes = 65536;
  absl::flat_hash_map<std::string, int> breadth_by_shape_;
  uint64_t breadth_generation_ = 0;
  const Snapshot* breadth_snapshot_ = nullptr;
  uint64_t breadth_stamp_ = 0;
  std::string shape_;
};

}  // namespace jc::scheduler
