// The job manager's scheduling pass (SPEC A11, A15, A16): the waiting queue offered to the
// scheduler in its order, each job's place asked for, its queue position and waiting reason
// said, and a drain started for a job past the queue's longest wait. The rest of the job
// manager is in job_manager.cc.

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/timestamp.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/job_kind.h"
#include "services/jobs/job_manager.h"
#include "services/jobs/job_state.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {

namespace {

// The service a job already received, in GPU-seconds (CPU-seconds for a job without GPUs),
// from its attempts that started: Tiresias' attained service, for the las order.
template <typename Quantity>
double AttainedService(const v1::JobRecord& r, Quantity&& quantity) {
  double attained = 0;
  for (int i = 0; i < r.replicas_size(); ++i) {
    const auto& rep = r.replicas(i);
    double seconds = 0;
    for (const auto& a : rep.attempts()) {
      if (!a.has_started_at() || !a.has_ended_at()) continue;
      seconds += std::max(0.0, absl::ToDoubleSeconds(FromTimestamp(a.ended_at()) - FromTimestamp(a.started_at())));
    }
    if (seconds <= 0) continue;
    const scheduler::Resources& q = quantity(r, i);
    attained += seconds * (q.gpu > 0 ? q.gpu : std::max(1.0, q.cpu));
  }
  return attained;
}

}  // namespace

double JobManager::Attained(const v1::JobRecord& r) const {
  return AttainedService(r, [&](const v1::JobRecord& job, int replica) {
    auto q = scheduler_->SpecQuantity(job.request().tasks(job.replicas(replica).task_index()).resource_spec_id());
    return q.ok() ? *q : scheduler::Resources{};
  });
}

void JobManager::NoteQueuePositions(const std::vector<std::pair<std::string, std::string>>& offered, absl::Time now) {
  constexpr size_t kNamed = 1000;  // past it, "past the 1000th": a reader needs no more
  std::vector<const std::pair<std::string, std::string>*> waiting;
  for (const auto& o : offered) {
    auto it = active_.find(o.first);
    if (it == active_.end()) continue;
    const v1::JobRecord& r = it->second.record;
    if (waiting_.Contains(r)) {
      waiting.push_back(&o);
    }
  }
  auto ordinal = [](size_t n) {
    const size_t tens = n % 100;
    const char* suffix = (tens >= 11 && tens <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
    return absl::StrCat(n, suffix);
  };
  std::map<std::string, std::string> positions;
  const std::string order = options_.queue.Name();
  for (size_t k = 0; k < waiting.size(); ++k) {
    const auto& [id, why] = *waiting[k];
    positions[id] = k < kNamed ? absl::StrCat(ordinal(k + 1), " of ", waiting.size(), " waiting (", order, ")",
                                              why.empty() ? "" : ": ", why)
                               : absl::StrCat("past the ", kNamed, "th of ", waiting.size(), " waiting (", order, ")");
  }
  std::lock_guard<std::mutex> lock(positions_mu_);
  queue_positions_.swap(positions);
}

std::vector<std::pair<std::string, std::string>> JobManager::ScheduleQueue(
    const std::function<void(const std::string&)>& schedule_one) {
  // The one waiting queue, as it stands (jobs were put in, brought up to date and taken out
  // as they came, waited again or left): only the shares are counted for the pass.
  if (estimator_ != nullptr && options_.queue.UsesExpected()) {
    // What ended since may have taught the estimator more of the waiting jobs (once a
    // second at most; in memory).
    const int64_t asked = reestimation_.Apply(
        waiting_,
        [this](const std::string& id) {
          auto it = active_.find(id);
          return it == active_.end() ? nullptr : &it->second.record;
        },
        *estimator_, absl::Seconds(options_.queue.unknown_expected_s), clock_->Now());
    if (asked > 0) spdlog::debug("job manager: {} waiting jobs' expected lengths asked again", asked);
  }
  scheduler::JobQueue& queue = waiting_.ordered();
  queue.SetCapacity(scheduler_->FederationCapacity());
  // One scheduler call per spec, not per replica (each call takes the scheduler's lock).
  absl::flat_hash_map<std::string, scheduler::Resources> by_spec;
  auto quantity = [&](const v1::JobRecord& r, int replica) -> const scheduler::Resources& {
    const std::string& spec = r.request().tasks(r.replicas(replica).task_index()).resource_spec_id();
    auto [it, added] = by_spec.try_emplace(spec);
    if (added) {
      auto q = scheduler_->SpecQuantity(spec);
      if (q.ok()) it->second = *q;
    }
    return it->second;
  };
  // Recounted every cycle from the jobs in memory, as the quotas are: O(replicas), no I/O.
  queue.ClearHeld();
  for (const auto& [id, job] : active_) {
    const v1::JobRecord& r = job.record;
    for (int i = 0; i < r.replicas_size(); ++i) {
      const auto& rep = r.replicas(i);
      if (rep.state() != v1::ReplicaRecord::WAITING && !Ended(rep.state())) {
        queue.AddHeld(r.request().project(), quantity(r, i));
      }
    }
  }
  const double now = absl::ToDoubleSeconds(clock_->Now() - absl::UnixEpoch());
  std::vector<std::pair<std::string, std::string>> offered;
  offered.reserve(waiting_.size());
  queue.Pass(now, [&](int64_t seq) {
    const std::string id = waiting_.IdOf(seq);  // a copy: placing it takes it out
    auto it = active_.find(id);
    if (it == active_.end()) {
      waiting_.Remove(seq);  // gone from memory: nothing waits for it
      return false;
    }
    offered.emplace_back(id, queue.Explain(seq, now));
    size_t before = burst_.dispatches.size();
    schedule_one(id);
    it = active_.find(id);
    if (it == active_.end()) return false;
    const v1::JobRecord& r = it->second.record;
    for (size_t k = before; k < burst_.dispatches.size(); ++k) {
      queue.AddHeld(r.request().project(), quantity(r, burst_.dispatches[k].replica));
    }
    // Placed whole: it left the queue.
    return !waiting_.Contains(r);
  });
  return offered;
}

bool JobManager::Overdue(const v1::JobRecord& r, absl::Time now) const {
  return r.has_received_at() && !r.stop_requested() &&
         absl::ToDoubleSeconds(now - WaitingSince(r)) >= options_.queue.max_wait_s;
}

void JobManager::DrainFor(v1::JobRecord& r) {
  // Past the longest wait and fitting nowhere: backfill would hand the capacity it needs
  // to smaller jobs piecemeal for ever (SPEC A16, nothing starves). Its first waiting
  // replica gets a center that drains for it.
  for (const auto& rep : r.replicas()) {
    if (rep.state() != v1::ReplicaRecord::WAITING) continue;
    // Never where it was refused, while another center could take it (as its placement).
    auto center = scheduler_->Drain(r.job_id(), r.request(),
                                    {rep.task_index(), rep.replica_index(), rep.attempt(), {},
                                     HeldRefusals(rep, clock_->Now())});
    if (center.ok() && !center->empty()) {
      r.set_waiting_reason(absl::StrCat(r.waiting_reason(), r.waiting_reason().empty() ? "" : "; ",
                                        "waited past the queue's longest wait: ", *center,
                                        " drains for it (nothing else starts there unless it ends first)"));
    } else if (center.status().code() == absl::StatusCode::kFailedPrecondition) {
      r.set_waiting_reason(absl::StrCat(r.waiting_reason(), r.waiting_reason().empty() ? "" : "; ",
                                        "waited past the queue's longest wait: ", center.status().message()));
    }
    return;
  }
}

std::vector<Dispatch> JobManager::Schedule(Active& job, const estimator::TaskEstimates* estimates) {
  found_no_fit_ = false;
  v1::JobRecord& r = job.record;
  std::vector<scheduler::Scheduler::Slot> slots;
  std::vector<int> indices;
  std::vector<std::string> siblings;
  const absl::Time pass_now = clock_->Now();
  absl::Time backing_off_until = absl::InfinitePast();  // the nearest restart still to come
  for (int i = 0; i < r.replicas_size(); ++i) {
    const auto& rep = r.replicas(i);
    if (rep.state() == v1::ReplicaRecord::WAITING && rep.has_restart_after() &&
        FromTimestamp(rep.restart_after()) > pass_now) {
      // A service's replica that ended starts again after its back-off (SPEC A17).
      const absl::Time at = FromTimestamp(rep.restart_after());
      if (backing_off_until == absl::InfinitePast() || at < backing_off_until) backing_off_until = at;
      continue;
    }
    if (rep.state() == v1::ReplicaRecord::WAITING) {
      // Where it failed, and where it was moved from, only when nothing else fits.
      std::vector<std::string> avoid(rep.failed_centers().begin(), rep.failed_centers().end());
      avoid.insert(avoid.end(), rep.moved_from().begin(), rep.moved_from().end());
      slots.push_back({rep.task_index(), rep.replica_index(), rep.attempt(), std::move(avoid),
                       HeldRefusals(rep, pass_now)});
      indices.push_back(i);
    } else if (!rep.center_id().empty() && !Ended(rep.state())) {
      siblings.push_back(rep.center_id());
    }
  }
  const bool backing_off = backing_off_until != absl::InfinitePast();
  const std::string backoff_reason =
      backing_off ? absl::StrCat("a replica restarting after a back-off, at ",
                                 absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", backing_off_until, absl::UTCTimeZone()))
                  : "";
  if (slots.empty() && backing_off && !r.stop_requested()) {
    if (r.waiting_reason() != backoff_reason) r.set_waiting_reason(backoff_reason);
    return {};
  }
  if (slots.empty() || r.stop_requested()) {
    waiting_.Remove(r);
    return {};
  }
  // Project quota on running resources: the whole job waits until what it needs fits.
  const std::string& project = r.request().project();
  const bool limited = admission_.Limits(project);
  std::pair<double, double> need{0, 0};
  if (limited) {
    need = admission_.Need(r, indices);
    if (std::string held = admission_.Hold(project, need.first, need.second); !held.empty()) {
      r.set_waiting_reason(held);
      return {};
    }
  }
  auto decision = scheduler_->Place(r.job_id(), r.request(), slots, siblings, nullptr, estimates);
  if (!decision.ok()) {
    r.set_waiting_reason(std::string(decision.status().message()));
    if (decision.status().code() == absl::StatusCode::kInvalidArgument) {
      // The catalog changed under the job (its spec or image is gone): it can never run.
      JobEffects fx;
      ApplyUnplaceable(r, r.waiting_reason(), clock_->Now(), &fx);
      ApplyEffects(job, fx);
    }
    return {};
  }
  std::vector<Dispatch> out;
  std::vector<int> placed;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (decision->centers[k].empty()) continue;
    auto* rep = r.mutable_replicas(indices[k]);
    const auto& task = r.request().tasks(rep->task_index());
    const bool image = decision->stage_image[k];
    bool stage = mover_ != nullptr && (image || !task.datasets().empty());
    rep->set_state(stage ? v1::ReplicaRecord::STAGING : v1::ReplicaRecord::DISPATCHING);
    rep->set_center_id(decision->centers[k]);
    rep->set_image(k < decision->image_content.size() ? decision->image_content[k] : "");
    NotePlaced(r, indices[k], clock_->Now());
    if (stage) {
      rep->set_message(absl::StrCat("staging ", image ? absl::StrCat("image ", task.image_id()) : "",
                                    image && !task.datasets().empty() ? " and " : "",
                                    task.datasets().empty() ? "" : "datasets", " to ", rep->center_id()));
    }
    out.push_back({r.job_id(), indices[k], rep->attempt(), rep->center_id(), stage});
    placed.push_back(indices[k]);
  }
  if (limited && !placed.empty()) {
    // Everything placed (the usual case) needs what was checked above; a part, its own share.
    if (placed.size() != indices.size()) need = admission_.Need(r, placed);
    admission_.AddRunning(project, need.first, need.second);
  }
  if (decision->placed && backing_off) {
    // Everything due is placed, but a replica still backs off: the job stays in line for it.
    r.set_waiting_reason(backoff_reason);
  } else if (decision->placed) {
    waiting_.Remove(r);
    r.clear_waiting_reason();
    if (limited) admission_.Placed(project);
  } else {
    r.set_waiting_reason(decision->reason);
    found_no_fit_ = out.empty();  // placement ran and found no center for it now
  }
  if (decision->never.empty() || !out.empty()) {
    unsatisfiable_since_.erase(r.job_id());
  } else {
    // No registered center could run what is left any more (a center left): it waits for
    // one that can for the grace, then fails with the reason.
    const absl::Time now = clock_->Now();
    const absl::Time since = unsatisfiable_since_.try_emplace(r.job_id(), now).first->second;
    if (now - since >= options_.unsatisfiable_grace) {
      unsatisfiable_since_.erase(r.job_id());
      JobEffects fx;
      ApplyUnplaceable(r,
                       absl::StrCat("no registered center can run it any more (", decision->never, "); waited ",
                                    absl::FormatDuration(options_.unsatisfiable_grace), " for one"),
                       now, &fx);
      ApplyEffects(job, fx);
      MarkDirty(r.job_id());
      waiting_.Remove(r);
      return {};
    }
    r.set_waiting_reason(absl::StrCat(decision->reason, "; no registered center could run it now whatever frees up (",
                                      decision->never, "): it fails at ",
                                      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", since + options_.unsatisfiable_grace,
                                                       absl::UTCTimeZone()),
                                      " unless a center that can joins"));
  }
  *r.mutable_updated_at() = ToTimestamp(clock_->Now());
  return out;
}

}  // namespace jc::jobs
