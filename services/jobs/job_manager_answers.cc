// The job manager's answers from the centers (SPEC A11, C7): submits answered, data staged,
// replica events, and the reconcile pass that asks the adapters what the events may have
// missed. The rest of the job manager is in job_manager.cc.

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/replica_forgotten.h"
#include "common/timestamp.h"
#include "common/utf8.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/job_kind.h"
#include "services/jobs/job_manager.h"
#include "services/jobs/job_state.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {

void JobManager::OnSubmitAnswers(const std::string& center, std::vector<SubmitItem> items,
                                 std::vector<absl::StatusOr<apb::Replica>> results, absl::Time answered_at) {
  if (metrics_) metrics_->dispatch_batch->Observe(static_cast<double>(items.size()));
  for (size_t i = 0; i < items.size(); ++i) {
    // Answers to a term that ended are not applied: the next term asks again by key.
    if (items[i].term != term_ || !leading_) continue;
    // The job ended or moved on while the submit was under way: do not leave it running.
    if (CompleteSubmit(items[i].dispatch, results[i], answered_at)) burst_.stops.emplace_back(center, items[i].key);
  }
}

void JobManager::OnStaged(const Dispatch& d, uint64_t term, const absl::Status& staged) {
  if (term != term_ || !leading_) return;
  auto it = active_.find(d.job_id);
  if (it == active_.end()) return;
  Active& job = it->second;
  auto* rep = job.record.mutable_replicas(d.replica);
  if (rep->state() != v1::ReplicaRecord::STAGING || rep->attempt() != d.attempt) return;
  if (staged.ok()) {
    NoteStaged(job.record, d.replica, clock_->Now());
    rep->set_state(v1::ReplicaRecord::DISPATCHING);
    rep->clear_message();
    Dispatch next = d;
    next.stage = false;
    burst_.dispatches.push_back(next);
  } else {
    JobEffects fx;
    ApplyAttemptFailedToStart(job.record, d.replica, std::string(staged.message()), clock_->Now(), &fx);
    ApplyEffects(job, fx);
  }
  *job.record.mutable_updated_at() = ToTimestamp(clock_->Now());
  MarkDirty(d.job_id);
}

void JobManager::OnEvent(const std::string& center, uint64_t term, const apb::ReplicaEvent& e) {
  if (term != term_ || !leading_) return;  // the next term resumes from its committed cursor
  uint64_t& cursor = cursors_[center];
  cursor = std::max(cursor, e.cursor());
  auto it = active_.find(e.replica().key().job_id());
  // Keys of another control plane (or of this one before its store was re-initialised)
  // are not ours, whatever their job id says.
  bool ours = it != active_.end() && e.replica().key().origin() == it->second.record.origin();
  if (!ours && it != active_.end()) {
    spdlog::warn("job manager: center {} reported replica {} of another origin ({}, not {}); ignored", center,
                 e.replica().name(), e.replica().key().origin(), it->second.record.origin());
    if (metrics_) metrics_->events_ignored->Add({{"reason", "other_origin"}}).Increment();
  } else if (it == active_.end() && metrics_) {
    // A job that ended (its last replicas' stops arrive after it), or not ours.
    metrics_->events_ignored->Add({{"reason", "job_not_active"}}).Increment();
  }
  if (!ours) return;
  int index = IndexOf(it->second.record, e.replica().key().task_index(), e.replica().key().replica_index());
  if (index < 0) return;
  StopIfStopped(it->second.record, index, center, e.replica());
  JobEffects fx;
  // The attempt's own history first: an attempt the replica moved past, or of a job that
  // ended, still reports its end (and usage) from the center it was placed at.
  bool attempt_here = ApplyAttemptReport(it->second.record, index, center, e.replica(), clock_->Now(), &fx);
  // A center reports only on the replicas recorded at it: another center's report on one
  // (a rogue or confused center naming a replica running elsewhere) changes nothing.
  if (const std::string& at = it->second.record.replicas(index).center_id(); at != center) {
    if (!attempt_here) {
      spdlog::warn("job manager: center {} reported on replica {}/{} of {}, which is recorded at {}; ignored", center,
                   e.replica().key().task_index(), e.replica().key().replica_index(), it->first, at);
      if (metrics_) metrics_->events_ignored->Add({{"reason", "other_center"}}).Increment();
    }
  } else {
    ApplyReport(it->second.record, index, e.replica(), clock_->Now(), &fx);
  }
  ApplyEffects(it->second, fx);
  if (fx.changed) MarkDirty(it->first);
}

void JobManager::NoteHolding(const v1::JobRecord& job, std::set<std::string>* holding) {
  for (const auto& rep : job.replicas()) {
    if (rep.center_id().empty() || Ended(rep.state()) || rep.state() == v1::ReplicaRecord::WAITING) continue;
    if (KindOf(job.request().tasks(rep.task_index())) != JobKind::kBatch) holding->insert(rep.center_id());
  }
}

void JobManager::AsksOf(const std::string& id, const v1::JobRecord& job, bool all, const std::set<std::string>& connected,
                        std::vector<ReplicaTracker::Ask>* asks) {
  for (int i = 0; i < job.replicas_size(); ++i) {
    const auto& rep = job.replicas(i);
    // Replicas on centers whose event stream is down (or all, after taking over) are asked
    // directly, by key.
    bool live = rep.state() == v1::ReplicaRecord::PENDING || rep.state() == v1::ReplicaRecord::RUNNING;
    if (live && (all || !connected.count(rep.center_id()))) asks->push_back({id, i, rep.center_id(), ReplicaKeyOf(job, i)});
    // Attempts stopped or moved past whose end their center has not reported yet: asked
    // every time (they are few, and their usage is due), wherever the stream stands.
    for (const auto& a : rep.attempts()) {
      if (a.closed() || a.center_id().empty() || (live && a.attempt() == rep.attempt())) continue;
      if (a.attempt() == rep.attempt() &&
          (rep.state() == v1::ReplicaRecord::DISPATCHING || rep.state() == v1::ReplicaRecord::STAGING)) {
        continue;  // not at its center yet
      }
      apb::ReplicaKey key = ReplicaKeyOf(job, i);
      key.set_attempt(a.attempt());
      asks->push_back({id, i, a.center_id(), std::move(key)});
    }
  }
}

bool JobManager::GiveUpLostCenters(const std::set<std::string>& holding, const std::set<std::string>& connected,
                                   absl::Time now) {
  bool gave_up = false;
  std::erase_if(lost_since_, [&](const auto& e) { return holding.count(e.first) == 0; });
  for (const std::string& center : holding) {
    std::optional<std::string> gone = connected.count(center) ? std::nullopt : scheduler_->CenterGone(center);
    if (!gone.has_value()) {
      lost_since_.erase(center);
      continue;
    }
    const absl::Time since = lost_since_.try_emplace(center, now).first->second;
    if (now - since < options_.center_lost_grace) continue;
    const std::string why = absl::StrCat("center ", center, " lost: ", *gone, ", its adapter unreachable for ",
                                         absl::FormatDuration(absl::Trunc(now - since, absl::Seconds(1))));
    spdlog::warn("job manager: {}: giving up its services' and interactive jobs' replicas", why);
    for (auto& [id, job] : active_) {
      JobEffects fx;
      for (int i = 0; i < job.record.replicas_size(); ++i) {
        if (job.record.replicas(i).center_id() == center) ApplyCenterLost(job.record, i, why, now, &fx);
      }
      if (!fx.changed) continue;
      ApplyEffects(job, fx);
      MarkDirty(id);
      gave_up = true;
    }
    lost_since_.erase(center);
  }
  return gave_up;
}

void JobManager::OnReconcile(bool all, const std::set<std::string>& connected) {
  if (!leading_) return;
  ReconcilePass pass;
  pass.all = all;
  pass.connected = connected;
  pass.term = term_;
  pass.now = clock_->Now();
  ContinueReconcile(std::move(pass), /*one_turn=*/all);
}

void JobManager::ContinueReconcile(ReconcilePass pass, bool one_turn) {
  // A pass of an earlier term, or while standing down, is dropped: the next poll starts anew.
  if (!leading_ || pass.term != term_) return;
  auto it = pass.after.has_value() ? active_.upper_bound(*pass.after) : active_.begin();
  for (int n = 0; it != active_.end() && (one_turn || n < std::max(1, options_.walk_slice)); ++it, ++n) {
    const std::string& id = it->first;
    Active& job = it->second;
    // Attempts whose center has not reported their end within the grace: the control
    // plane's own times stand in (a report later corrects them).
    if (AwaitsUsage(job.record)) {
      JobEffects fx;
      CloseOverdue(job.record, pass.now, options_.usage_report_grace, &fx);
      if (fx.changed) {
        ApplyEffects(job, fx);
        MarkDirty(id);
      }
    }
    NoteHolding(job.record, &pass.holding);
    AsksOf(id, job.record, pass.all, pass.connected, &pass.asks);
    pass.after = id;
  }
  if (it != active_.end()) {
    loop_.Post([this, pass = std::move(pass)]() mutable { ContinueReconcile(std::move(pass), false); });
    return;
  }
  if (GiveUpLostCenters(pass.holding, pass.connected, pass.now)) {
    // Replicas given up changed state: what to ask is taken again, after them.
    pass.asks.clear();
    for (const auto& [id, job] : active_) AsksOf(id, job.record, pass.all, pass.connected, &pass.asks);
  }
  if (pass.asks.empty()) return;
  uint64_t term = pass.term;
  tracker_.Read(std::move(pass.asks), [this, term](const ReplicaTracker::Ask& ask, absl::StatusOr<apb::Replica> replica) {
    loop_.Post([this, term, ask, replica = std::move(replica)] { OnReplicaRead(term, ask, replica); });
  });
}

namespace {

// The least an adapter keeps an ended replica, from when it learned of the end (adapter.proto
// GetReplica; the SDK's replica_retention is at least this).
constexpr absl::Duration kAdapterKeepsEndedAtLeast = absl::Hours(24);

}  // namespace

void JobManager::OnReplicaRead(uint64_t term, const ReplicaTracker::Ask& ask,
                               const absl::StatusOr<apb::Replica>& replica) {
  if (term != term_ || !leading_) return;
  // The center forgot replicas that ended long ago, and this may be one: its adapter's own
  // mark on the answer (common/replica_forgotten.h), never any FAILED_PRECONDITION (an
  // adapter that cannot prove its center says that too). Anything else is asked again later.
  const bool forgotten = IsReplicaForgotten(replica.status());
  if (!replica.ok() && !absl::IsNotFound(replica.status()) && !forgotten) return;
  auto it = active_.find(ask.job_id);
  if (it == active_.end()) return;
  auto* rep = it->second.record.mutable_replicas(ask.index);
  const bool current = rep->attempt() == ask.key.attempt() && rep->center_id() == ask.center;
  // The center's words, bounded: they go into the job's record and its status.
  const std::string forgot_why =
      forgotten ? absl::StrCat("center ", ask.center, " forgot it: ", ToUtf8(replica.status().message().substr(0, 512)))
                : std::string();
  const bool live = rep->state() == v1::ReplicaRecord::PENDING || rep->state() == v1::ReplicaRecord::RUNNING;
  if (replica.ok()) {
    StopIfStopped(it->second.record, ask.index, ask.center, *replica);
    JobEffects fx;
    ApplyAttemptReport(it->second.record, ask.index, ask.center, *replica, clock_->Now(), &fx);
    if (current) ApplyReport(it->second.record, ask.index, *replica, clock_->Now(), &fx);
    ApplyEffects(it->second, fx);
    if (!fx.changed) return;
  } else if (!current || Ended(rep->state())) {
    // An attempt that was stopped or moved past, unknown at its center: it never ran there.
    JobEffects fx;
    ApplyAttemptUnknown(it->second.record, ask.index, ask.center, ask.key.attempt(), clock_->Now(), &fx, forgot_why);
    if (!fx.changed) return;
  } else if (forgotten && !live) {
    return;  // being submitted again (or staged) meanwhile: that answer decides
  } else if (forgotten &&
             (!rep->has_dispatched_at() ||
              clock_->Now() - FromTimestamp(rep->dispatched_at()) < kAdapterKeepsEndedAtLeast ||
              LongRunning(KindOf(it->second.record.request().tasks(rep->task_index()))))) {
    // A center cannot have forgotten a replica it acknowledged less than its shortest
    // retention ago: a rogue or broken one. Taken as a failure there, as a report of one would
    // be (the retry policy applies, elsewhere), never as leave to fail it for good. So is a
    // service's or a stream's replica: started again is what its kind asks for anyway.
    apb::Replica failed;
    *failed.mutable_key() = ask.key;
    failed.set_state(apb::REPLICA_FAILED);
    failed.set_exit_code(-1);
    failed.set_message(absl::StrCat(forgot_why, " (taken as failed there: acknowledged less than ",
                                    absl::FormatDuration(kAdapterKeepsEndedAtLeast),
                                    " ago, the least an adapter keeps an ended replica, or of a kind that restarts)"));
    spdlog::warn("job manager: replica {}/{} of {}: {}", rep->task_index(), rep->replica_index(), ask.job_id,
                 failed.message());
    JobEffects fx;
    // And stopped there, in case it runs after all: never beside its retry.
    fx.stop.push_back(AttemptOf(*rep));
    ApplyAttemptReport(it->second.record, ask.index, ask.center, failed, clock_->Now(), &fx);
    ApplyReport(it->second.record, ask.index, failed, clock_->Now(), &fx);
    ApplyEffects(it->second, fx);
    if (!fx.changed) return;
  } else if (forgotten) {
    // It ended while this control plane had no word of it, longer ago than the center keeps
    // replicas: submitted again it could run twice, so it fails, saying why.
    spdlog::warn("job manager: replica {}/{} of {}: {}", rep->task_index(), rep->replica_index(), ask.job_id,
                 forgot_why);
    JobEffects fx;
    ApplyAttemptUnknown(it->second.record, ask.index, ask.center, ask.key.attempt(), clock_->Now(), &fx, forgot_why);
    ApplyForgotten(it->second.record, ask.index, forgot_why, clock_->Now(), &fx);
    ApplyEffects(it->second, fx);
    if (!fx.changed) return;
  } else {
    // The center does not know a replica it acknowledged (its adapter lost its book):
    // submitted again under the same key, as if never acknowledged.
    if (!live || rep->attempt() != ask.key.attempt()) return;
    spdlog::warn("job manager: center {} no longer knows replica {}/{} of {}; submitting it again by key", ask.center,
                 rep->task_index(), rep->replica_index(), ask.job_id);
    rep->set_state(v1::ReplicaRecord::DISPATCHING);
    rep->set_message(absl::StrCat("center ", ask.center, " no longer knew this replica; submitting it again"));
    burst_.dispatches.push_back({ask.job_id, ask.index, rep->attempt(), ask.center});
  }
  *it->second.record.mutable_updated_at() = ToTimestamp(clock_->Now());
  MarkDirty(ask.job_id);
}

}  // namespace jc::jobs
