#pragma once

// The hard constraints (ARCHITECTURE "Filters"): a center that fails one cannot run the
// replica. Each filter has a name, and says why, for the explain API.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "services/scheduler/placement_record.h"
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

// The sentences that are the same for every center a filter removes (a decision's record
// keeps which one, not the text: PlacementRecord).
inline constexpr const char* kReasonNotAvailable = "the center is not available (status unknown or unavailable)";
inline constexpr const char* kReasonNotPinned = "the task names other centers (manual placement)";
inline constexpr const char* kReasonMovingAway = "the replica is moving away from this center";
inline constexpr const char* kReasonRetryElsewhere =
    "an earlier attempt of this replica failed here; another center is preferred";
// (kRefusalHold, placement_request.h: its tests check that the two agree.)
inline constexpr const char* kReasonRefusedHere =
    "the center refused an attempt of this replica (or of another replica of its task) less than 10 minutes ago; "
    "until then it is tried again only when no other center could ever run it";
std::string NoSpecReason(const std::string& spec_id);
// The sentence of `filter` (as FilterCenter returned it for the request and center) when it
// is one of those; kOwn when FilterCenter must be asked for the center's own.
Sentence SentenceFor(const char* filter, const PlacementRequest& request, const CenterView& center);
// The text of a sentence other than kOwn.
std::string SentenceText(Sentence sentence, const std::string& spec_id);

// The filters FilterCenter runs first, in its order: they read of a center only what its
// gate holds (CenterGate: id, availability, security grade, run-as accounts) and of the
// request only what a GateRequest holds, so that a decision's record can apply them again
// to the centers the decision did not visit (ToProto) and say exactly what they said.
template <typename Request, typename Center>
const char* GateFilters(const Request& request, const Center& center, std::string* reason) {
  if (!center.available) {
    if (reason) *reason = kReasonNotAvailable;
    return kFilterAvailable;
  }
  if (!request.pinned_centers.empty() &&
      std::find(request.pinned_centers.begin(), request.pinned_centers.end(), center.id) ==
          request.pinned_centers.end()) {
    if (reason) *reason = kReasonNotPinned;
    return kFilterManual;
  }
  if (!request.excluded_center.empty() && center.id == request.excluded_center) {
    if (reason) *reason = kReasonMovingAway;
    return kFilterManual;
  }
  if (center.security_grade < request.min_security_grade) {
    if (reason) {
      *reason = absl::StrCat("security grade ", center.security_grade, " is below the required ",
                             request.min_security_grade);
    }
    return kFilterSecurity;
  }
  if (!center.runs_any_project && !(!request.user.empty() && center.run_as_users.contains(request.user)) &&
      !(!request.project.empty() && center.run_as_projects.contains(request.project))) {
    if (reason) {
      *reason = absl::StrCat("the center maps no local account for ",
                             request.project.empty() ? "jobs without a project"
                                                     : absl::StrCat("project ", request.project),
                             request.user.empty() ? "" : absl::StrCat(" or user ", request.user), " (run_as)");
    }
    return kFilterRunAs;
  }
  return nullptr;
}

// Returns nullptr when the center may run the replica, else the failing filter's name,
// with a sentence in `reason` when `reason` is not null (the hot path passes null).
// With `ignore_avoid`, earlier failures do not remove a center. When it passes and `spec`
// is not null, *spec is the requested spec as the center offers it.
// `keys` are the request's keys hashed (the placer hashes them once per decision); null:
// hashed here.
const char* FilterCenter(const PlacementRequest& request, const CenterView& center, bool ignore_avoid,
                         std::string* reason, const SpecAtCenter** spec = nullptr, const RequestKeys* keys = nullptr);

// The centers a decision need visit, in ascending snapshot order (issue 48 item 2): with
// the snapshot's indexes, those that offer the request's spec, or its pinned centers when
// they are fewer; every other center fails a filter (spec_offered, manual_placement)
// whatever the request says. Null: every center (the snapshot is not indexed). `buffer`
// holds the pinned list when that is the answer.
const std::vector<int>* CandidateCenters(const PlacementRequest& request, const Snapshot& snapshot,
                                         const RequestKeys& keys, std::vector<int>* buffer);

// Where a job that has waited past the queue's longest wait and fits nowhere now should
// wait (SPEC A16): of the centers that pass every filter but free capacity (and are not
// draining for another job), the one whose free capacity comes closest to the spec (the
// largest fraction of its scarcest resource), first in federation order on a tie; that
// center then drains for it (PlacementRequest::draining_centers for every job behind it),
// as Slurm's backfill keeps the top job's start. A center that refused the request
// (PlacementRequest::refused_centers) only when no other center could ever take it, as the
// placer. -1: none could ever take it (or only a refusing one, while another could).
int DrainingCenterFor(const PlacementRequest& request, const Snapshot& snapshot);

// The centers (snapshot indices) whose capacity could ever hold the request's spec and
// that pass every other filter, whatever frees up or drains (SPEC A16): how narrow a
// waiting job is, and which centers to keep for it (PlacementRequest::kept_centers).
std::vector<int> CentersThatCouldEverTake(const PlacementRequest& request, const Snapshot& snapshot);
// The same, counted only as far as `limit` (a caller that asks only whether there are more
// than so many stops there), the centers appended to `out` when it is not null; `keys` are
// the request's. Returns how many were found (at most `limit`). `free_beyond_capacity`, when
// not null, is set when one passed by its free capacity alone (a usage report saying more
// is free than the center has): a count that reservations can change, so none to keep.
int CentersThatCouldEverTake(const PlacementRequest& request, const Snapshot& snapshot, const RequestKeys& keys,
                             int limit, std::vector<int>* out, bool* free_beyond_capacity = nullptr);

// Whether a center other than those that refused the request (PlacementRequest::
// refused_centers) could ever take it, as CentersThatCouldEverTake counts: then a retry waits
// for one rather than going back to a center that refused it.
bool UnrefusedCenterCouldEverTake(const PlacementRequest& request, const Snapshot& snapshot, const RequestKeys& keys);

}  // namespace jc::scheduler
