#pragma once

// The scheduler's in-memory view of every center (ARCHITECTURE "Snapshot"): capacity,
// usage, offered specs with prices and power, images, datasets, network figures, and the
// replicas it has placed there that the center has not reported yet (assumed
// reservations). A scheduling decision reads only this, never the store.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace jc::scheduler {

// Quantities of every resource kind the standard names (Table 2), memory in MB and
// storage in GB.
struct Resources {
  double cpu = 0, gpu = 0, npu = 0, mlu = 0, memory_mb = 0, storage_gb = 0;

  Resources& operator+=(const Resources& o);
  Resources& operator-=(const Resources& o);
  // Every kind of `need` is available here.
  bool Covers(const Resources& need) const;
  // How many copies of `unit` fit (the tightest kind decides); a huge number when `unit` is empty.
  double CopiesOf(const Resources& unit) const;
};

// A logical position ("cn/north/bj-1", Tables 1 and 6) parsed once into hashed path
// components, so comparing two positions costs no string work in a decision.
struct TopologyPath {
  std::vector<uint64_t> parts;
  static TopologyPath Parse(absl::string_view path);
};

// 0..1: the share of leading components two positions have in common.
double TopologyAffinity(const TopologyPath& a, const TopologyPath& b);

// A resource spec as one center offers it (Table 3 and the spec x center map).
struct SpecAtCenter {
  Resources quantity;
  double price = 0;                  // per hour of one replica, in force when the view was read
  double execution_power_watts = 0;  // formula 1, P_exe while a replica of this spec runs
  // The price's history, oldest first (catalog PriceChange): what an attempt that started
  // at some instant is billed at.
  std::vector<std::pair<absl::Time, double>> prices;
  double PriceAt(absl::Time at) const {
    double p = prices.empty() ? price : prices.front().second;
    for (const auto& [from, value] : prices) {
      if (from <= at) p = value;
    }
    return p;
  }
};

struct NetworkFigures {
  double bandwidth_mbps = 0;
  double latency_ms = 0;
  double jitter_ms = 0;
  double loss_rate = 0;  // 0..1
};

// The key of `project`'s image `id` ('': the federation's) in CenterView::images. Image
// ids are unique within a project (issue 44, hole 13): another project's image of the same
// id is another image. '/' is in no project name or image id (CheckId).
inline std::string ImageKey(const std::string& project, const std::string& id) {
  return project.empty() ? id : project + "/" + id;
}

// The fastest a center may say it is, against the reference (performance_factor 1).
inline constexpr double kMaxPerformanceFactor = 1000;

struct CenterView {
  std::string id;
  bool available = false;  // registry status 1
  int status = 2;          // the registry's: 0 unavailable, 1 available, 2 unknown
  // Its adapter has described it (CenterInfo) at least once: what it runs (images, run-as
  // accounts) is known, not assumed.
  bool described = false;
  int security_grade = 0;
  std::string topology;  // logical position, "cn/north/bj-1"
  TopologyPath topology_path;  // set by Snapshot::Upsert
  Resources capacity;
  Resources free;  // the last usage report's free, less assumed reservations
  int running_tasks = 0;
  int waiting_tasks = 0;
  int assumed_replicas = 0;  // placed here, not reported by the center yet
  double static_power_watts = 0;
  double performance_factor = 1;
  // What the center's own scheduler says of its queue (SPEC A16, issue 45): by spec id, how
  // long a replica of the spec submitted now would wait there before it starts (nexec's
  // pending jobs and backfill reservations, Slurm's `squeue --start`), as of
  // `queue_reported_at`. A spec absent here: the center did not say, and placement estimates
  // the wait from free capacity, the queue's length and what runs there.
  absl::flat_hash_map<std::string, absl::Duration> reported_start_delay;
  absl::Time queue_reported_at = absl::InfinitePast();
  NetworkFigures network;
  // Whose replicas the center runs (CenterInfo.run_as): any, or these projects and users.
  bool runs_any_project = true;
  absl::flat_hash_set<std::string> run_as_projects;
  absl::flat_hash_set<std::string> run_as_users;
  absl::flat_hash_map<std::string, SpecAtCenter> specs;
  // Offers it would run were it available (its capacity holds the spec): for NeverRuns.
  absl::flat_hash_map<std::string, SpecAtCenter> dormant_specs;
  // The catalog's images present here, by ImageKey (image ids are unique only within a
  // project), and the ids its adapter reports (federation keys: the center's own names).
  absl::flat_hash_set<std::string> images;
  // Its adapter can be given an image it lacks (an image mover): a job naming an image
  // absent here may still be placed here, the image's transfer counted like data.
  bool receives_images = false;
  // Its adapter runs a replica in its image (CenterInfo.runs_images): a task whose image
  // has content (PlacementRequest.image_content) goes only to such centers.
  bool runs_images = false;
  // How many ports its adapter's range holds (CenterInfo.port_range_size): a task declaring
  // more named ports than that (PlacementRequest.ports) goes elsewhere.
  int port_range_size = 0;
  absl::flat_hash_set<std::string> datasets;  // "name:version" present at the center

  // The job load the standard's least-load and fairness strategies count (6.6.2 a, h).
  int JobLoad() const { return running_tasks + waiting_tasks + assumed_replicas; }

  // Lookups by a key hashed once per decision rather than once per center (a decision
  // looks the same spec, image and datasets up in every center).
  struct Key {
    explicit Key(const std::string& k) : key(&k), hash(absl::flat_hash_set<std::string>::hasher{}(k)) {}
    const std::string* key;
    size_t hash;
  };
  const SpecAtCenter* FindSpec(const Key& k) const {
    auto it = specs.find(*k.key, k.hash);
    return it == specs.end() ? nullptr : &it->second;
  }
  bool HasImage(const Key& k) const { return images.find(*k.key, k.hash) != images.end(); }
  bool HasDataset(const Key& k) const { return datasets.find(*k.key, k.hash) != datasets.end(); }
};

// What the filters that run before spec_offered read of a center (filters.h GateFilters),
// kept with its id for the explanations of the decisions made on an indexed snapshot: those
// name every center, and visit only the ones offering the spec.
struct CenterGate {
  std::string id;
  bool available = false;
  int security_grade = 0;
  bool runs_any_project = true;
  absl::flat_hash_set<std::string> run_as_projects;
  absl::flat_hash_set<std::string> run_as_users;
};

// A dataset a task reads and where it is.
struct DatasetNeed {
  std::string key;  // "name:version"
  double size_mb = 0;
  bool is_private = false;               // never moves: the job goes to it
  std::vector<TopologyPath> locations;  // logical positions of the centers holding it
};

// A number for one snapshot as it was built, copied or assigned (a change made in place
// keeps it): a cache keyed on it (Placer::BreadthOf) does not outlive a refresh that built
// the snapshot anew at the same address.
class SnapshotStamp {
 public:
  SnapshotStamp() : value_(Next()) {}
  SnapshotStamp(const SnapshotStamp&) : value_(Next()) {}
  SnapshotStamp& operator=(const SnapshotStamp&) {
    value_ = Next();
    return *this;
  }
  uint64_t value() const { return value_; }

 private:
  static uint64_t Next();
  uint64_t value_;
};

class Snapshot {
 public:
  // Adds or replaces a center; returns its index. Like every change but Reserve and
  // Release, it drops the indexes until the next Reindex.
  int Upsert(CenterView center);
  void Remove(absl::string_view id);

  const std::vector<CenterView>& centers() const { return centers_; }
  const CenterView* Find(absl::string_view id) const;
  CenterView* FindMutable(absl::string_view id);
  CenterView& MutableAt(int index) {
    indexed_ = false;
    return centers_[index];
  }
  int IndexOf(absl::string_view id) const;  // -1 when unknown

  // Indexes over the centers (issue 48 item 2), so that a decision visits the centers that
  // offer its spec rather than every center: built here, kept through Reserve and Release,
  // dropped by any other change (a caller that changed a center through FindMutable or
  // MutableAt calls Reindex again). A reference those returned is not used to change a
  // center after Reindex: the indexes would not know. Without them every lookup below answers as a scan
  // would, only slower.
  void Reindex();
  bool indexed() const { return indexed_; }
  // The centers (ascending indices) whose offers (CenterView::specs) include `spec`; null
  // when not indexed.
  const std::vector<int>* CentersOffering(const CenterView::Key& spec) const;
  // Every center's gate by index: while indexed, one list shared by the explanations of
  // the decisions made on it (PlacementRecord); else a copy made now.
  std::shared_ptr<const std::vector<CenterGate>> gates() const;

  // An assumed reservation: a replica of `quantity` placed at the center and not yet
  // reported by it. Release undoes one (the center reported it, or it ended).
  void Reserve(int index, const Resources& quantity);
  void Release(int index, const Resources& quantity);

  // Sum and sum of squares of every center's job load, for the fairness strategy (kept
  // up to date through Reserve and Release while indexed, else summed; exact integers
  // either way, so both give the same figure).
  double load_sum() const;
  double load_sum_squares() const;

  // Which snapshot this is (SnapshotStamp): new when built, copied or assigned.
  uint64_t stamp() const { return stamp_.value(); }

  // One replica's resources under each resource spec of the catalog.
  absl::flat_hash_map<std::string, Resources> spec_quantity;

 private:
  // A reserved or released replica changed the center's job load from `before`.
  void LoadChanged(int before, int after);

  std::vector<CenterView> centers_;
  absl::flat_hash_map<std::string, int> index_;
  bool indexed_ = false;
  absl::flat_hash_map<std::string, std::vector<int>> offering_;
  std::shared_ptr<const std::vector<CenterGate>> gates_;
  int64_t load_sum_ = 0;  // exact: a double drifts from a fresh sum once past 2^53
  __int128 load_sum_squares_ = 0;
  SnapshotStamp stamp_;
};

}  // namespace jc::scheduler
