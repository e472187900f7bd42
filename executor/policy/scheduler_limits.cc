// Limits (SPEC B7): the scheduler's side of its LimitBook (limit_book.h: buckets and
// checks), and why a pending job waits.
// Part of the Scheduler class (scheduler.h); the cycle itself is scheduler.cc.

#include <algorithm>
#include <cmath>
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

void Scheduler::SetLimits(const std::vector<LimitConfig>& limits) {
  limits_.Set(limits);
  for (int64_t id : model_.running) {
    const Job& job = model_.jobs.at(id);
    limits_.Apply(job.request, job.placement, +1, model_.user_groups);
  }
}

void Scheduler::SetLimitTime(absl::Time now, absl::TimeZone tz) { limits_.SetTime(now, tz); }

std::string Scheduler::PendingReason(int64_t job_id) const {
  auto it = pending_reasons_.find(job_id);
  return it == pending_reasons_.end() ? "" : it->second;
}

}  // namespace jc::nexec
