// When a job not yet submitted would start (SPEC A16), by the backfill planner's own reckoning (backfill.h).
// Part of the Scheduler class (scheduler.h); the cycle itself is scheduler.cc.

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <unordered_set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "executor/policy/scheduler.h"
#include "executor/policy/scheduler_internal.h"

namespace jc::nexec {

StartEstimate Scheduler::EstimateStart(JobRequest probe) {
  constexpr int64_t kProbeId = -1;  // no job's id: nothing the probe leaves names a job
  probe.id = kProbeId;
  StartEstimate out;
  if (absl::Status checked = Check(&probe); !checked.ok()) {
    out.reason = std::string(checked.message());
    return out;
  }
  Queue& queue = model_.queues.at(probe.queue);
  if (!queue.open) {
    out.reason = absl::StrCat("queue ", probe.queue, " is closed (outside its run window)");
    return out;
  }
  // What the probe's user has in the per-user maps now: a probe leaves no entry behind (an
  // account with nothing queued would otherwise appear in nexec limits and the queue
  // orders' maps, one per name probed).
  const std::string user = probe.user;
  const bool had_used = queue.used_by_user.count(user) > 0;
  const bool had_held = queue.held_by_user.count(user) > 0;
  const LimitBook::Buckets had_buckets = limits_.Remember();
  Job job;
  job.request = std::move(probe);
  job.cluster = model_.ClusterOf(queue.config, job.request.user);
  // As the next cycle would see it: what the last cycle's reservations hold stays held,
  // unless the probe ends before every one of them starts (it backfills).
  const bool held = backfill_.any() && !backfill_.MayBackfill(job, now_);
  if (held) backfill_.Hold(+1);
  Placement found;
  if (TryPlace(job, queue, &found)) {
    Apply(job, queue, found, -1);
    out.start = now_;
  } else if (std::optional<absl::Time> start = backfill_.EarliestFit(job, queue, &found)) {
    out.start = std::max(*start, now_);
    if (out.start == absl::InfiniteFuture()) out.reason = "a job in the way has no run limit";
  } else {
    auto limit = pending_reasons_.find(kProbeId);
    out.reason = limit != pending_reasons_.end() ? limit->second : "it fits not even on the whole cluster";
  }
  if (held) backfill_.Hold(-1);
  pending_reasons_.erase(kProbeId);
  // Whatever the probe added it took back; the entries it made go too (what is left in
  // them is at most rounding).
  if (!had_used) queue.used_by_user.erase(user);
  if (!had_held) queue.held_by_user.erase(user);
  limits_.Forget(had_buckets);
  return out;
}

std::optional<ReservationView> Scheduler::ReservationOf(int64_t job_id) const { return backfill_.ReservationOf(job_id); }

}  // namespace jc::nexec
