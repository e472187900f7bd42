#include "services/jobs/duration_learning.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "common/timestamp.h"
#include "services/estimator/job_class.h"

namespace jc::jobs {

int DurationLearning::Learn(const v1::JobRecord& r, const JobEffects& fx,
                            std::map<std::string, std::string>* rows) const {
  if (estimator_ == nullptr) return 0;
  int taught = 0;
  const bool time_limited = absl::StrContains(r.stop_reason(), kTimeLimitStop);
  for (const MeteredAttempt& m : fx.metered) {
    const v1::AttemptRecord& a = m.attempt;
    // A run says how long the job takes when it ran to its end: it succeeded, or its time
    // limit ended it (a lower bound, kept as one). A failure, a stop, or the control
    // plane's own guess at an end its center never reported says nothing of its length.
    if (m.correction || m.estimated || !a.has_started_at() || !a.has_ended_at()) continue;
    if (a.outcome() != "succeeded" && !(a.outcome() == "stopped" && time_limited)) continue;
    absl::Duration wall = FromTimestamp(a.ended_at()) - FromTimestamp(a.started_at());
    // Bounded by what the control plane saw itself (from its submit to its learning of the
    // end): a center cannot make a user's jobs look longer than they ran.
    if (a.has_submitted_at() && a.has_seen_ended_at()) {
      wall = std::min(wall, FromTimestamp(a.seen_ended_at()) - FromTimestamp(a.submitted_at()));
    }
    if (wall <= absl::ZeroDuration()) continue;
    // One run per task per attempt, however many replicas it has: its first replica stands
    // for it. A task of 1,000 replicas is one job's run, not 1,000 observations that would
    // swamp a key's median at once.
    if (r.replicas(m.index).replica_index() != 0) continue;
    const int task = r.replicas(m.index).task_index();
    ++taught;
    for (auto& row :
         estimator_->Observe(estimator::JobClassOf(r.request(), task), wall, performance_(a.center_id()))) {
      (*rows)[row.key] = std::move(row.sketch);
    }
  }
  return taught;
}

int64_t DurationLearning::RowsToKeep(absl::Time now) {
  if (estimator_ == nullptr || estimator_->keys() < estimator_->max_keys() || now - pruned_ < absl::Hours(1)) {
    return 0;
  }
  pruned_ = now;
  return estimator_->max_keys();
}

}  // namespace jc::jobs
