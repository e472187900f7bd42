#pragma once

// What the scheduler needs to place one replica of one task: the task's spec, image,
// datasets and constraints, independent of how the job arrived (REST, gRPC, plan).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "services/scheduler/scarce_specs.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

// How long a center that refused an attempt of a replica stays refused for it
// (PlacementRequest::refused_centers): long enough that a refusing center does not spend a
// job's retries one after another while the other centers are only full for now; short
// enough that a refusal that was transient (a staging error, an adapter restarting), or a
// center the replica waits for that never frees up, holds it back only so long.
inline constexpr absl::Duration kRefusalHold = absl::Minutes(10);

struct PlacementRequest {
  std::string job_id;
  int task_index = 0;
  int replica_index = 0;
  std::string spec_id;
  std::string image_id;  // empty: the task brings no image
  // The image's key in CenterView::images (ImageKey of the image the job resolved: its
  // project's own, else the federation's); empty: image_id.
  std::string image_key;
  const std::string& ImageKeyOrId() const { return image_key.empty() ? image_id : image_key; }
  // What moving the image to a center that must be given it costs (the catalog's size_mb,
  // or kDefaultImageMb when unknown), counted with the missing data.
  double image_size_mb = 0;
  // What the image is (registry/repository@sha256:..., from the catalog); empty: it has
  // no content of its own and the command runs on the center's hosts.
  std::string image_content;
  // How many named ports one replica declares (SPEC A17): only centers whose port range
  // holds that many take it.
  int ports = 0;
  std::vector<std::string> pinned_centers;  // manual placement: only these
  // Never this one (a replica moving away from the center it waited at, SPEC A16).
  std::string excluded_center;
  int min_security_grade = 0;
  // Who the job belongs to: a center runs it only when it maps one of them to a local
  // account (run_as).
  std::string project;
  std::string user;
  std::vector<DatasetNeed> datasets;
  // Centers draining for a job that has waited past the queue's longest wait (SPEC A16,
  // "nothing starves"), each with when that job is expected to start there (InfiniteFuture:
  // unknown): another replica starts there only if it is expected to end by then (backfill,
  // as Slurm's), so the waiting job is not held back. A hard constraint, unlike avoid_centers.
  absl::flat_hash_map<std::string, absl::Time> draining_centers;
  // Centers kept for waiting jobs that can run at few centers (SPEC A16, "scarce capacity
  // goes first to the jobs that can use nothing else"), each with how many centers the
  // narrowest such job could ever run at: a replica that could run at more centers than
  // that goes to one of the others when one can start it now, and takes a kept one only
  // when none can (nothing idles for the narrow job). A preference, unlike
  // draining_centers: the model-agnostic job does not take the only H100s while jobs that
  // need H100s wait.
  absl::flat_hash_map<std::string, int> kept_centers;
  // Centers kept for the scarce specs placed lately (ScarceSpecs, SPEC A16): a replica
  // that could run at kScarceBreadthRatio times as many centers as such a spec goes to one
  // of the others when one can start it now, unless it is bound to end there within
  // kKeptCenterShortRun. Shared by every request of a pass; null: none.
  std::shared_ptr<const ScarceCenters> scarce_centers;
  // Centers where an earlier attempt of this replica failed: the retry policy prefers
  // any other, and falls back to them only when nothing else fits.
  absl::flat_hash_set<std::string> avoid_centers;
  // Of avoid_centers, those where an attempt could not start (the adapter refused the
  // submit, or the data could not be staged): the fallback above does not return to one
  // while another center could ever run the replica (CentersThatCouldEverTake); the
  // replica waits for that one to free up instead, since the refusing center would most
  // likely refuse again and spend a retry.
  absl::flat_hash_set<std::string> refused_centers;
  // Centers already running this job's other replicas (data-topology affinity).
  std::vector<std::string> sibling_centers;
  absl::Duration expected_runtime = absl::Hours(1);  // formula 1's t_e - t_s at performance 1
  // What a center draining for an overdue job may count on this replica to end by (the
  // draining_centers filter): its time limit (enforced; wall time at any center) when it has
  // one, else what 9 runs in 10 of its history stayed under (at performance 1), else
  // nothing — never the job's own unenforced estimatedDuration, which would let a long
  // job say "1s" and start where the overdue job waits.
  std::optional<absl::Duration> time_limit;
  absl::Duration backfill_runtime = absl::InfiniteDuration();
  absl::Time now = absl::UnixEpoch();
  absl::Time deadline = absl::InfiniteFuture();  // QoS target; infinite: none
  // The caller may hold the replica for a center that cannot take it now (SPEC A16, "wait
  // for the faster center"): the free-capacity filter then passes a center whose capacity
  // could ever hold the spec, the expected_completion strategy weighs the wait there, and
  // the decision says whether the chosen center takes it now (ReplicaDecision::fits_now).
  // A job-wide placement (PlaceJob) treats a center that cannot take it now as no center.
  bool consider_busy_centers = false;
};

// Records that `center` is kept for a job `breadth` centers could ever take: a center kept
// for several keeps the narrowest (PlacementRequest::kept_centers).
inline void Keep(absl::flat_hash_map<std::string, int>& kept, const std::string& center, int breadth) {
  auto [it, added] = kept.try_emplace(center, breadth);
  if (!added && breadth < it->second) it->second = breadth;
}

// The request's lookup keys, hashed once for all centers of a decision.
struct RequestKeys {
  explicit RequestKeys(const PlacementRequest& r) : spec(r.spec_id), image(r.ImageKeyOrId()) {
    for (const auto& d : r.datasets) datasets.emplace_back(d.key);
  }
  CenterView::Key spec;
  CenterView::Key image;
  std::vector<CenterView::Key> datasets;  // as PlacementRequest::datasets
};

}  // namespace jc::scheduler
