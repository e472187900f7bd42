#include "services/scheduler/filters.h"

#include <optional>

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "services/scheduler/scoring/factors.h"

namespace jc::scheduler {
namespace {

std::string Describe(const Resources& r) {
  return absl::StrCat("cpu ", r.cpu, ", gpu ", r.gpu, ", npu ", r.npu, ", mlu ", r.mlu, ", memory ", r.memory_mb,
                      " MB, storage ", r.storage_gb, " GB");
}

}  // namespace

std::string NoSpecReason(const std::string& spec_id) {
  return absl::StrCat("the center does not offer resource spec ", spec_id);
}

Sentence SentenceFor(const char* filter, const PlacementRequest& request, const CenterView& center) {
  if (filter == kFilterAvailable) return Sentence::kNotAvailable;
  if (filter == kFilterSpec) return Sentence::kNoSpec;
  if (filter == kFilterAvoid) {
    return request.refused_centers.contains(center.id) ? Sentence::kRefusedHere : Sentence::kRetryElsewhere;
  }
  if (filter == kFilterManual) {
    // FilterCenter's order: a center the task does not name, else the one it moves from.
    const bool named = request.pinned_centers.empty() ||
                       std::find(request.pinned_centers.begin(), request.pinned_centers.end(), center.id) !=
                           request.pinned_centers.end();
    return named ? Sentence::kMovingAway : Sentence::kNotPinned;
  }
  return Sentence::kOwn;
}

std::string SentenceText(Sentence sentence, const std::string& spec_id) {
  switch (sentence) {
    case Sentence::kNotAvailable:
      return kReasonNotAvailable;
    case Sentence::kNotPinned:
      return kReasonNotPinned;
    case Sentence::kMovingAway:
      return kReasonMovingAway;
    case Sentence::kNoSpec:
      return NoSpecReason(spec_id);
    case Sentence::kRetryElsewhere:
      return kReasonRetryElsewhere;
    case Sentence::kRefusedHere:
      return kReasonRefusedHere;
    case Sentence::kOwn:
      break;
  }
  return {};
}

namespace {

// FilterCenter; with `ever`, as for a request that may wait for busy capacity and that no
// center drains against (CentersThatCouldEverTake's question, without copying the request).
const char* FilterCenterFor(const PlacementRequest& request, const CenterView& center, bool ignore_avoid,
                            std::string* reason, const SpecAtCenter** spec_out, const RequestKeys* keys, bool ever) {
  std::optional<RequestKeys> own;
  if (keys == nullptr) keys = &own.emplace(request);
  if (const char* failed = GateFilters(request, center, reason)) return failed;
  const SpecAtCenter* spec = center.FindSpec(keys->spec);
  if (spec == nullptr) {
    if (reason) *reason = NoSpecReason(request.spec_id);
    return kFilterSpec;
  }
  if (!ever && !request.draining_centers.empty()) {
    if (auto it = request.draining_centers.find(center.id); it != request.draining_centers.end()) {
      // Backfill: only what is bound to end before the waiting job's expected start (its
      // time limit, else its history's 90th percentile at the center's performance).
      const double perf = center.performance_factor > 0 ? center.performance_factor : 1;
      const absl::Duration run = request.time_limit ? *request.time_limit : request.backfill_runtime / perf;
      const absl::Time end =
          request.now + absl::Seconds(TransferSeconds(MissingDataMb(request, *keys, center), center)) + run;
      if (it->second == absl::InfiniteFuture() || end > it->second) {  // unknown start: nothing ends first
        if (reason) {
          *reason = it->second == absl::InfiniteFuture()
                        ? std::string("draining for a job that has waited past the queue's longest wait")
                        : absl::StrCat("draining for a job that has waited past the queue's longest wait, expected to "
                                       "start there in ",
                                       absl::FormatDuration(absl::Seconds(std::round(
                                           std::max(0.0, absl::ToDoubleSeconds(it->second - request.now))))),
                                       "; this replica would end after");
        }
        return kFilterDraining;
      }
    }
  }
  // Free now, or (for a caller that may hold the replica for a busy center) ever.
  const bool busy_will_do = ever || request.consider_busy_centers;
  if (!center.free.Covers(spec->quantity) && !(busy_will_do && center.capacity.Covers(spec->quantity))) {
    if (reason && busy_will_do) {
      *reason = absl::StrCat("too small: needs ", Describe(spec->quantity), "; capacity ", Describe(center.capacity));
    } else if (reason) {
      *reason = absl::StrCat("not enough free: needs ", Describe(spec->quantity), "; free ", Describe(center.free));
    }
    return kFilterCapacity;
  }
  if (request.ports > center.port_range_size) {
    if (reason) {
      *reason = !center.described
                    ? absl::StrCat("the task declares ", request.ports,
                                   " named port(s) and the center's adapter has not yet said whether it gives "
                                   "replicas ports")
                : center.port_range_size == 0
                    ? absl::StrCat("the task declares ", request.ports,
                                   " named port(s) and the center gives replicas none (its adapter's configuration has "
                                   "no ports:)")
                    : absl::StrCat("the task declares ", request.ports, " named ports and the center's port range holds ",
                                   center.port_range_size);
    }
    return kFilterPorts;
  }
  if (!request.image_content.empty() && !center.runs_images) {
    if (reason) {
      *reason = absl::StrCat("image ", request.image_id, " has content (", request.image_content,
                             ") and the center runs commands on its hosts, not in images");
    }
    return kFilterImage;
  }
  // A center that runs images pulls one with content from its registry: it can always be
  // given it (the transfer is counted where it does not hold the digest yet).
  const bool pulls = !request.image_content.empty() && center.runs_images;
  if (!request.image_id.empty() && !center.receives_images && !pulls && !center.HasImage(keys->image)) {
    if (reason) {
      *reason = absl::StrCat("image ", request.image_id,
                             " is not present at the center, and its adapter cannot be given images (no image mover)");
    }
    return kFilterImage;
  }
  for (size_t k = 0; k < request.datasets.size(); ++k) {
    const auto& d = request.datasets[k];
    if (d.is_private && !center.HasDataset(keys->datasets[k])) {
      if (reason) *reason = absl::StrCat("private dataset ", d.key, " is elsewhere and must not move");
      return kFilterPrivateData;
    }
  }
  if (!ignore_avoid && !request.avoid_centers.empty() && request.avoid_centers.contains(center.id)) {
    if (reason) *reason = request.refused_centers.contains(center.id) ? kReasonRefusedHere : kReasonRetryElsewhere;
    return kFilterAvoid;
  }
  if (spec_out) *spec_out = spec;
  return nullptr;
}

}  // namespace

const char* FilterCenter(const PlacementRequest& request, const CenterView& center, bool ignore_avoid,
                         std::string* reason, const SpecAtCenter** spec_out, const RequestKeys* keys) {
  return FilterCenterFor(request, center, ignore_avoid, reason, spec_out, keys, /*ever=*/false);
}

const std::vector<int>* CandidateCenters(const PlacementRequest& request, const Snapshot& snapshot,
                                         const RequestKeys& keys, std::vector<int>* buffer) {
  const std::vector<int>* offering = snapshot.CentersOffering(keys.spec);
  if (offering == nullptr || request.pinned_centers.empty() || request.pinned_centers.size() >= offering->size()) {
    return offering;
  }
  buffer->clear();
  for (const std::string& id : request.pinned_centers) {
    if (int i = snapshot.IndexOf(id); i >= 0) buffer->push_back(i);
  }
  std::sort(buffer->begin(), buffer->end());
  buffer->erase(std::unique(buffer->begin(), buffer->end()), buffer->end());
  return buffer;
}

int DrainingCenterFor(const PlacementRequest& request, const Snapshot& snapshot) {
  PlacementRequest ever = request;
  ever.consider_busy_centers = true;  // capacity that could ever hold it
  for (auto& [center, start] : ever.draining_centers) start = absl::InfinitePast();  // taken
  const RequestKeys keys(ever);
  // A center that refused the request only when no other could take it (as the placer).
  int best = -1, best_refused = -1;
  double best_fraction = -1, best_refused_fraction = -1;
  const auto& centers = snapshot.centers();
  std::vector<int> buffer;
  const std::vector<int>* source = CandidateCenters(ever, snapshot, keys, &buffer);
  const size_t count = source != nullptr ? source->size() : centers.size();
  for (size_t k = 0; k < count; ++k) {
    const size_t i = source != nullptr ? static_cast<size_t>((*source)[k]) : k;
    const SpecAtCenter* spec = nullptr;
    if (FilterCenter(ever, centers[i], /*ignore_avoid=*/true, nullptr, &spec, &keys) != nullptr) continue;
    // How close its free capacity is to the spec: the scarcest resource's fraction.
    const Resources& need = spec->quantity;
    const Resources& free = centers[i].free;
    double fraction = 1;
    auto scarce = [&](double have, double want) {
      if (want > 0) fraction = std::min(fraction, std::max(0.0, have) / want);
    };
    scarce(free.cpu, need.cpu);
    scarce(free.gpu, need.gpu);
    scarce(free.npu, need.npu);
    scarce(free.mlu, need.mlu);
    scarce(free.memory_mb, need.memory_mb);
    const bool refused = !ever.refused_centers.empty() && ever.refused_centers.contains(centers[i].id);
    double& best_so_far = refused ? best_refused_fraction : best_fraction;
    if (fraction > best_so_far) {
      best_so_far = fraction;
      (refused ? best_refused : best) = static_cast<int>(i);
    }
  }
  if (best >= 0) return best;
  // Only where it was refused: there if nothing else could ever take it, as the placer
  // would send it there; else nowhere (it waits for a center draining for another job).
  return best_refused >= 0 && !UnrefusedCenterCouldEverTake(ever, snapshot, keys) ? best_refused : -1;
}

int CentersThatCouldEverTake(const PlacementRequest& request, const Snapshot& snapshot, const RequestKeys& keys,
                             int limit, std::vector<int>* out, bool* free_beyond_capacity) {
  const auto& centers = snapshot.centers();
  std::vector<int> buffer;
  const std::vector<int>* source = CandidateCenters(request, snapshot, keys, &buffer);
  const size_t count = source != nullptr ? source->size() : centers.size();
  int found = 0;
  for (size_t k = 0; k < count && found < limit; ++k) {
    const size_t i = source != nullptr ? static_cast<size_t>((*source)[k]) : k;
    const SpecAtCenter* spec = nullptr;
    if (FilterCenterFor(request, centers[i], /*ignore_avoid=*/true, nullptr, &spec, &keys, /*ever=*/true) ==
        nullptr) {
      if (free_beyond_capacity != nullptr && !centers[i].capacity.Covers(spec->quantity)) *free_beyond_capacity = true;
      ++found;
      if (out != nullptr) out->push_back(static_cast<int>(i));
    }
  }
  return found;
}

std::vector<int> CentersThatCouldEverTake(const PlacementRequest& request, const Snapshot& snapshot) {
  std::vector<int> out;
  CentersThatCouldEverTake(request, snapshot, RequestKeys(request), std::numeric_limits<int>::max(), &out);
  return out;
}

bool UnrefusedCenterCouldEverTake(const PlacementRequest& request, const Snapshot& snapshot, const RequestKeys& keys) {
  // Among any refused_centers.size() + 1 centers found, one did not refuse.
  std::vector<int> found;
  CentersThatCouldEverTake(request, snapshot, keys, static_cast<int>(request.refused_centers.size()) + 1, &found);
  return std::any_of(found.begin(), found.end(), [&](int i) {
    return !request.refused_centers.contains(snapshot.centers()[static_cast<size_t>(i)].id);
  });
}

}  // namespace jc::scheduler
