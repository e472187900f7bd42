#pragma once

// The hard constraints (ARCHITECTURE "Filters"): a center that fails one cannot run the
// replica. Each filter has a name, and says why, for the explain API.

#include <string>
#include <vector>

#include "services/scheduler/placement_request.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

// The filters in the order they run; the first that fails names the reason.
inline constexpr const char* kFilterAvailable = "center_available";
inline constexpr const char* kFilterManual = "manual_placement";
inline constexpr const char* kFilterSecurity = "security_grade";
inline constexpr const char* kFilterRunAs = "run_as_account";
inline constexpr const char* kFilterSpec = "spec_offered";
inline constexpr const char* kFilterDraining = "draining_for_overdue_job";
inline constexpr const char* kFilterCapacity = "free_capacity";
inline constexpr const char* kFilterImage = "image_present";
inline constexpr const char* kFilterPrivateData = "private_data";
inline constexpr const char* kFilterPorts = "ports_offered";
inline constexpr const char* kFilterAvoid = "retry_elsewhere";
// Not a filter of FilterCenter's: the placer's preference for the centers no narrower
// waiting job needs (PlacementRequest::kept_centers), named in the explanation.
inline constexpr const char* kFilterKept = "kept_for_narrower_job";

// Returns nullptr when the center may run the replica, else the failing filter's name,
// with a sentence in `reason` when `reason` is not null (the hot path passes null).
// With `ignore_avoid`, earlier failures do not remove a center. When it passes and `spec`
// is not null, *spec is the requested spec as the center offers it.
// `keys` are the request's keys hashed (the placer hashes them once per decision); null:
// hashed here.
const char* FilterCenter(const PlacementRequest& request, const CenterView& center, bool ignore_avoid,
                         std::string* reason, const SpecAtCenter** spec = nullptr, const RequestKeys* keys = nullptr);

// Where a job that has waited past the queue's longest wait and fits nowhere now should
// wait (SPEC A16): of the centers that pass every filter but free capacity (and are not
// draining for another job), the one whose free capacity comes closest to the spec (the
// largest fraction of its scarcest resource), first in federation order on a tie; that
// center then drains for it (PlacementRequest::draining_centers for every job behind it),
// as Slurm's backfill keeps the top job's start. -1: none could ever take it.
int DrainingCenterFor(const PlacementRequest& request, const Snapshot& snapshot);

// The centers (snapshot indices) whose capacity could ever hold the request's spec and
// that pass every other filter, whatever frees up or drains (SPEC A16): how narrow a
// waiting job is, and which centers to keep for it (PlacementRequest::kept_centers).
std::vector<int> CentersThatCouldEverTake(const PlacementRequest& request, const Snapshot& snapshot);

}  // namespace jc::scheduler
