#pragma once

// Figures several strategies derive from the snapshot the same way (standard 6.6.1): data
// that must move, its transfer time, and the run time at a center's performance. The
// placer computes them once per candidate and decision (CandidateFacts); the functions
// are here so that tests and tools compute them identically.

#include "services/scheduler/placement_request.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

// When a center reports no bandwidth, transfers are estimated at 1 Gbit/s.
inline constexpr double kDefaultBandwidthMbps = 1000;

// MB of the task's datasets the center does not hold, and of its image when the center
// must be given it (the filter has passed only centers that hold it or can receive it).
inline double MissingDataMb(const PlacementRequest& r, const CenterView& c) {
  double mb = !r.image_id.empty() && !c.images.contains(r.image_id) ? r.image_size_mb : 0;
  for (const auto& d : r.datasets) {
    if (!c.datasets.contains(d.key)) mb += d.size_mb;
  }
  return mb;
}
// The same with the request's keys hashed once (the placer's way).
inline double MissingDataMb(const PlacementRequest& r, const RequestKeys& keys, const CenterView& c) {
  double mb = !r.image_id.empty() && !c.HasImage(keys.image) ? r.image_size_mb : 0;
  for (size_t k = 0; k < r.datasets.size(); ++k) {
    if (!c.HasDataset(keys.datasets[k])) mb += r.datasets[k].size_mb;
  }
  return mb;
}

// Seconds to copy `missing_mb` in (formula 1's t_s - t_0).
inline double TransferSeconds(double missing_mb, const CenterView& c) {
  double bw = c.network.bandwidth_mbps > 0 ? c.network.bandwidth_mbps : kDefaultBandwidthMbps;
  return missing_mb * 8.0 / bw;
}

// Seconds the replica runs there (formula 1's t_e - t_s): the expected run time at
// performance 1, divided by the center's performance factor.
inline double RunSeconds(const PlacementRequest& r, const CenterView& c) {
  double perf = c.performance_factor > 0 ? c.performance_factor : 1;
  return absl::ToDoubleSeconds(r.expected_runtime) / perf;
}

struct CandidateFacts {
  double missing_mb = 0;
  double transfer_seconds = 0;
  double run_seconds = 0;
};

inline CandidateFacts FactsFor(const PlacementRequest& r, const RequestKeys& keys, const CenterView& c) {
  CandidateFacts f;
  f.missing_mb = MissingDataMb(r, keys, c);
  f.transfer_seconds = TransferSeconds(f.missing_mb, c);
  f.run_seconds = RunSeconds(r, c);
  return f;
}

inline CandidateFacts FactsFor(const PlacementRequest& r, const CenterView& c) { return FactsFor(r, RequestKeys(r), c); }

}  // namespace jc::scheduler
