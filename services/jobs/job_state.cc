#include "services/jobs/job_state.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/timestamp.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/job_kind.h"
#include "services/jobs/status_policy.h"
#include "services/scheduler/placement_request.h"

namespace jc::jobs {

AttemptRef AttemptOf(const v1::ReplicaRecord& r) {
  return {r.center_id(), r.task_index(), r.replica_index(), r.attempt()};
}

apb::ReplicaKey ReplicaKeyOf(const v1::JobRecord& job, int index) {
  const v1::ReplicaRecord& r = job.replicas(index);
  apb::ReplicaKey key;
  key.set_job_id(job.job_id());
  key.set_task_index(r.task_index());
  key.set_replica_index(r.replica_index());
  key.set_attempt(r.attempt());
  key.set_origin(job.origin());
  return key;
}

namespace {

bool JobEnded(const v1::JobRecord& job) { return job.status() == kCompleted || job.status() == kFailed; }

// Stops the replica's current attempt where it was sent (if it was) and releases its
// reservation.
void StopAttempt(v1::ReplicaRecord& r, absl::Time now, JobEffects* fx) {
  if (r.center_id().empty()) return;
  fx->stop.push_back(AttemptOf(r));
  fx->release.push_back(AttemptOf(r));
  NoteStopped(r, now);
}

// The endpoints `report` carries that the record keeps (SPEC A17): only the task's own port
// names (a center cannot add one), ports in range, ready only while it runs.
google::protobuf::RepeatedPtrField<v1::EndpointRecord> KeptEndpoints(const v1::TaskSpec& task, const apb::Replica& report) {
  google::protobuf::RepeatedPtrField<v1::EndpointRecord> out;
  // A host name or address as the adapter reaches it; anything else is not kept.
  auto plain_host = [](const std::string& h) {
    if (h.size() > 253) return false;
    for (char c : h) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':') return false;
    }
    return true;
  };
  for (const auto& e : report.endpoints()) {
    bool declared = false;
    for (const auto& p : task.ports()) declared |= p.name() == e.name();
    bool seen = false;  // one per name: a center cannot repeat one, nor stand one in for another
    for (const auto& k : out) seen |= k.name() == e.name();
    if (!declared || seen || e.port() < 1 || e.port() > 65535) continue;
    auto* kept = out.Add();
    kept->set_name(e.name());
    kept->set_host(plain_host(e.host()) ? e.host() : "");
    kept->set_port(e.port());
    kept->set_ready(e.ready() && report.state() == apb::REPLICA_RUNNING);
  }
  return out;
}

bool SameEndpoints(const google::protobuf::RepeatedPtrField<v1::EndpointRecord>& a,
                   const google::protobuf::RepeatedPtrField<v1::EndpointRecord>& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (a[i].name() != b[i].name() || a[i].host() != b[i].host() || a[i].port() != b[i].port() ||
        a[i].ready() != b[i].ready()) {
      return false;
    }
  }
  return true;
}

// Where a service's replica failed, once per center (it restarts without end).
void NoteFailedCenter(v1::ReplicaRecord& r, const std::string& center) {
  if (center.empty() || std::find(r.failed_centers().begin(), r.failed_centers().end(), center) != r.failed_centers().end()) return;
  r.add_failed_centers(center);
}

// A service restarts without end, and is scaled down and up without end: its record keeps
// the latest kKeptAttempts attempts of a replica, the one about to begin included (the older ones are closed and accounted
// for: their usage records hold what they cost).
void TrimAttempts(v1::ReplicaRecord& r) {
  while (r.attempts_size() >= kKeptAttempts) {  // room for the attempt about to begin
    auto& attempts = *r.mutable_attempts();
    auto oldest = std::find_if(attempts.begin(), attempts.end(), [](const v1::AttemptRecord& a) {
      return a.closed() && !a.estimated();  // an estimated one may still get its correction
    });
    if (oldest == attempts.end()) break;
    attempts.erase(oldest);
  }
}

// A long-running replica that ended (SPEC A17) waits to start again as a new attempt, after
// a back-off that doubles with each restart in a row (a run of kRestartResetAfter or more
// starts the count again): never a retry, never a failure.
void Restart(v1::ReplicaRecord& r, const std::string& why, absl::Time now) {
  const v1::AttemptRecord* ran = nullptr;
  for (const auto& a : r.attempts()) {
    if (a.attempt() == r.attempt()) ran = &a;
  }
  // How long it ran, ending no later than the control plane learnt of its end: a center's
  // clock (or word) cannot make a crash look like a long run and keep the back-off short.
  bool ran_long = false;
  if (ran != nullptr && ran->has_started_at() && ran->has_ended_at()) {
    absl::Time ended = FromTimestamp(ran->ended_at());
    if (ran->has_seen_ended_at()) ended = std::min(ended, FromTimestamp(ran->seen_ended_at()));
    ran_long = ended - FromTimestamp(ran->started_at()) >= kRestartResetAfter;
  }
  TrimAttempts(r);
  const int in_a_row = ran_long ? 0 : r.restarts_in_a_row();
  const absl::Duration backoff = RestartBackoff(in_a_row);
  r.set_restarts_in_a_row(in_a_row + 1);
  // Each start of a service's replica may be moved as a batch replica's may: the moves of
  // an earlier start do not count against this one (--max_moves is per start).
  r.set_moves(0);
  r.clear_moved_from();
  *r.mutable_restart_after() = ToTimestamp(now + backoff);
  r.set_attempt(r.attempt() + 1);
  r.set_state(v1::ReplicaRecord::WAITING);
  r.set_message(absl::StrCat("restarting in ", absl::FormatDuration(backoff), " (", in_a_row + 1,
                             in_a_row == 0 ? " restart" : " restarts", " in a row) after: ", why));
  r.clear_center_id();
  r.clear_dispatched_at();
}

}  // namespace

absl::Time WaitingSince(const v1::JobRecord& job) {
  // Its longest-waiting replica's: one that never ran waits from the submission, one that
  // restarts, is retried or was added by a scale from when that fell due. The longest, not
  // the latest: a sibling's crash loop must not restart the wait of a replica that has
  // waited hours (helper-67), and the queue's longest wait bounds every replica.
  const absl::Time received = FromTimestamp(job.received_at());
  absl::Time since = absl::InfiniteFuture();
  for (const auto& r : job.replicas()) {
    if (r.state() != v1::ReplicaRecord::WAITING) continue;
    since = std::min(since, r.has_restart_after() ? std::max(received, FromTimestamp(r.restart_after())) : received);
  }
  return since == absl::InfiniteFuture() ? received : since;
}

void NoteHandedOver(v1::JobRecord& job, absl::Time now, JobEffects* fx) {
  if (job.has_scheduled_at()) return;
  bool all_at_centers = std::none_of(job.replicas().begin(), job.replicas().end(), [](const auto& x) {
    return x.state() == v1::ReplicaRecord::WAITING || x.state() == v1::ReplicaRecord::STAGING ||
           x.state() == v1::ReplicaRecord::DISPATCHING;
  });
  if (!all_at_centers) return;
  // t_s of formula 3: every sub-task handed to a center (known from the submit's answer
  // or, when the center is quicker, from its events).
  *job.mutable_scheduled_at() = ToTimestamp(now);
  fx->handed_over = true;
  fx->changed = true;
}

void Settle(v1::JobRecord& job, absl::Time now, JobEffects* fx) {
  if (JobEnded(job)) return;
  JobOutcome outcome = EvaluateJob(job.request().status_policy(), job.replicas());
  if (job.stop_requested()) {
    // Stopping is how an interactive job or a service ends as meant (SPEC A17); a batch
    // job stopped before its end, or any job stopped by a limit, failed.
    const JobKind kind = KindOf(job.request().tasks(0));
    if (kind == JobKind::kInteractive && absl::StartsWith(job.stop_reason(), kIdleStop)) {
      outcome = JobOutcome{kCompleted, job.stop_reason()};  // culled when idle, as meant
    } else {
      outcome = kind != JobKind::kBatch && job.stop_reason().empty()
                    ? JobOutcome{kCompleted,
                                 absl::StrCat("stopped by the user (", WithArticle(kind), " job ends when stopped)")}
                    : JobOutcome{kFailed, job.stop_reason().empty() ? "stopped by the user" : job.stop_reason()};
    }
  }
  if (job.status() != outcome.status) fx->changed = true;
  job.set_status(outcome.status);
  if (!outcome.ended()) return;
  // Say which replica decided a failure, in its center's words.
  if (outcome.status == kFailed && !job.stop_requested()) {
    for (const auto& rep : job.replicas()) {
      if (rep.state() == v1::ReplicaRecord::FAILED) {
        absl::StrAppend(&outcome.reason, ": task ", rep.task_index(), " replica ", rep.replica_index(), " on ",
                        rep.center_id().empty() ? "no center" : rep.center_id(), ": ", rep.message());
        break;
      }
    }
  }
  job.set_status_reason(outcome.reason);
  // The outcome is decided: nothing of the job runs on.
  for (auto& rep : *job.mutable_replicas()) {
    if (Ended(rep.state())) continue;
    if (rep.state() != v1::ReplicaRecord::WAITING) StopAttempt(rep, now, fx);
    rep.set_state(v1::ReplicaRecord::STOPPED);
    rep.set_message(absl::StrCat("stopped: the job ", outcome.status, " (", outcome.reason, ")"));
  }
  *job.mutable_updated_at() = ToTimestamp(now);
  fx->ended = outcome.status;
  fx->wait = false;
  fx->changed = true;
}

void ApplyReport(v1::JobRecord& job, int index, const apb::Replica& report, absl::Time now, JobEffects* fx) {
  auto* rep = job.mutable_replicas(index);
  if (report.key().attempt() != rep->attempt() || Ended(rep->state())) return;
  if (rep->state() == v1::ReplicaRecord::WAITING) return;  // an attempt not submitted
  if (rep->state() == v1::ReplicaRecord::PENDING || rep->state() == v1::ReplicaRecord::DISPATCHING) {
    // Asked back and ended without a start (the attempt's history closed it "withdrawn",
    // or, for a caller that keeps none, by the same rule): a move, not a failure.
    const v1::AttemptRecord* current = nullptr;
    for (const auto& a : rep->attempts()) {
      if (a.attempt() == rep->attempt()) current = &a;
    }
    if (current != nullptr && current->has_withdraw_asked_at() &&
        (current->outcome() == "withdrawn" || (!current->closed() && WithdrawnAsAsked(*current, report)))) {
      ApplyWithdrawn(job, index, now, fx);
      return;
    }
  }
  auto before = rep->state();
  // Its endpoints as the center gave and probed them (SPEC A17), of this attempt.
  if (auto kept = KeptEndpoints(job.request().tasks(rep->task_index()), report); !SameEndpoints(kept, rep->endpoints())) {
    *rep->mutable_endpoints() = std::move(kept);
    fx->changed = true;
  }
  switch (report.state()) {
    case apb::REPLICA_PENDING:
      if (rep->state() == v1::ReplicaRecord::DISPATCHING) rep->set_state(v1::ReplicaRecord::PENDING);
      break;
    case apb::REPLICA_RUNNING:
      rep->set_state(v1::ReplicaRecord::RUNNING);
      break;
    case apb::REPLICA_SUCCEEDED:
      fx->release.push_back(AttemptOf(*rep));
      if (LongRunning(KindOf(job.request().tasks(rep->task_index()))) && !job.stop_requested()) {
        rep->set_exit_code(0);
        Restart(*rep, "exited 0", now);
        fx->wait = true;
        fx->changed = true;
        break;
      }
      rep->set_state(v1::ReplicaRecord::SUCCEEDED);
      rep->set_exit_code(0);
      break;
    case apb::REPLICA_STOPPED:
    case apb::REPLICA_FAILED: {
      rep->set_exit_code(report.exit_code());
      rep->set_message(report.message());
      fx->release.push_back(AttemptOf(*rep));
      if (LongRunning(KindOf(job.request().tasks(rep->task_index()))) && !job.stop_requested()) {
        // A service ends only when stopped: whatever ended it, it starts again, preferring
        // another center when this one failed it.
        if (report.state() == apb::REPLICA_FAILED) NoteFailedCenter(*rep, rep->center_id());
        Restart(*rep, report.message().empty() ? absl::StrCat("exited ", report.exit_code()) : report.message(), now);
        fx->wait = true;
      } else if (job.stop_requested()) {
        rep->set_state(v1::ReplicaRecord::STOPPED);
      } else if (RetryIfAllowed(job.request().retry_policy(), rep, now)) {
        fx->wait = true;
      } else {
        rep->set_state(v1::ReplicaRecord::FAILED);
      }
      fx->changed = true;  // an attempt ended, even when its retry looks like the state before
      break;
    }
    default:
      return;
  }
  if (rep->state() != before) fx->changed = true;
  if (before == v1::ReplicaRecord::DISPATCHING && rep->state() != before) NoteHandedOver(job, now, fx);
  if (fx->changed) *job.mutable_updated_at() = ToTimestamp(now);
  Settle(job, now, fx);
}

void ApplyForgotten(v1::JobRecord& job, int index, const std::string& why, absl::Time now, JobEffects* fx) {
  auto* rep = job.mutable_replicas(index);
  if (Ended(rep->state()) || rep->state() == v1::ReplicaRecord::WAITING) return;
  rep->set_exit_code(-1);
  rep->set_message(why);
  fx->release.push_back(AttemptOf(*rep));
  rep->set_state(job.stop_requested() ? v1::ReplicaRecord::STOPPED : v1::ReplicaRecord::FAILED);
  fx->changed = true;
  *job.mutable_updated_at() = ToTimestamp(now);
  Settle(job, now, fx);
}

void ApplySubmitAccepted(v1::JobRecord& job, int index, const apb::Replica& answer, absl::Time now,
                         JobEffects* fx) {
  auto* rep = job.mutable_replicas(index);
  ApplyAttemptReport(job, index, rep->center_id(), answer, now, fx);
  if (rep->state() == v1::ReplicaRecord::DISPATCHING) rep->set_state(v1::ReplicaRecord::PENDING);
  rep->clear_message();
  *rep->mutable_dispatched_at() = ToTimestamp(now);
  fx->reported.push_back(AttemptOf(*rep));
  fx->center_accepted_at.push_back(answer.has_submitted_at() ? FromTimestamp(answer.submitted_at())
                                                             : absl::InfiniteFuture());
  fx->reported_at = std::min(fx->reported_at, now);
  ApplyReport(job, index, answer, now, fx);
  NoteHandedOver(job, now, fx);
  Settle(job, now, fx);
}

void ApplyCenterLost(v1::JobRecord& job, int index, const std::string& why, absl::Time now, JobEffects* fx) {
  auto* rep = job.mutable_replicas(index);
  const JobKind kind = KindOf(job.request().tasks(rep->task_index()));
  if (kind == JobKind::kBatch || rep->center_id().empty() || Ended(rep->state()) ||
      rep->state() == v1::ReplicaRecord::WAITING) {
    return;
  }
  const std::string center = rep->center_id();
  // Given up here: stopped there once the center answers again (pending stops are sent
  // until it does), so that the old attempt and a new one never both run for long.
  NoteGivenUp(*rep, why);
  StopAttempt(*rep, now, fx);
  rep->set_message(why);
  rep->set_exit_code(-1);
  fx->changed = true;
  *job.mutable_updated_at() = ToTimestamp(now);
  if (job.stop_requested()) {
    rep->set_state(v1::ReplicaRecord::STOPPED);
  } else if (LongRunning(kind)) {
    NoteFailedCenter(*rep, center);
    Restart(*rep, why, now);
    fx->wait = true;
  } else {
    rep->set_state(v1::ReplicaRecord::FAILED);  // an interactive session ends with its center
  }
  Settle(job, now, fx);
}

namespace {

// Records that `center` refused `r` at `now`: its own time, kept beside the refused centers
// (a record from before refusal_times gets each earlier center's time from refused_at).
void NoteRefusal(v1::ReplicaRecord& r, const std::string& center, absl::Time now) {
  while (r.refusal_times_size() < r.refused_centers_size()) *r.add_refusal_times() = r.refused_at();
  const auto it = std::find(r.refused_centers().begin(), r.refused_centers().end(), center);
  if (it == r.refused_centers().end()) {
    r.add_refused_centers(center);
    *r.add_refusal_times() = ToTimestamp(now);
  } else {
    auto* at = r.mutable_refusal_times(static_cast<int>(it - r.refused_centers().begin()));
    *at = ToTimestamp(std::max(FromTimestamp(*at), now));
  }
  // The latest of them all, however the clock stepped (a leader whose clock lags): HeldRefusals
  // holds none once even this one has passed.
  if (!r.has_refused_at() || FromTimestamp(r.refused_at()) < now) *r.mutable_refused_at() = ToTimestamp(now);
}

}  // namespace

void ApplyAttemptFailedToStart(v1::JobRecord& job, int index, const std::string& why, absl::Time now,
                               JobEffects* fx) {
  auto* rep = job.mutable_replicas(index);
  CloseNeverStarted(job, index, why, now);
  rep->set_message(why);
  rep->set_exit_code(-1);
  fx->release.push_back(AttemptOf(*rep));
  fx->changed = true;
  *job.mutable_updated_at() = ToTimestamp(now);
  std::string center = rep->center_id();
  if (!center.empty()) {
    // What a center refuses of a replica (its spec, its image, its data) it refuses of the
    // task's every replica: each not ended holds the refusal, so that a gang's siblings are
    // not sent there one after another, each spending the gang's retries.
    for (auto& other : *job.mutable_replicas()) {
      if (other.task_index() != rep->task_index() || (&other != rep && Ended(other.state()))) continue;
      NoteRefusal(other, center, now);
    }
  }
  if (LongRunning(KindOf(job.request().tasks(rep->task_index()))) && !job.stop_requested()) {
    // A service is never given up on: it starts again elsewhere if it can, after a back-off.
    NoteFailedCenter(*rep, center);
    Restart(*rep, why, now);
    fx->wait = true;
    Settle(job, now, fx);
    return;
  }
  if (!RetryIfAllowed(job.request().retry_policy(), rep, now)) {
    rep->set_state(v1::ReplicaRecord::FAILED);  // the status policy ends the job, stopping the rest
    Settle(job, now, fx);
    return;
  }
  fx->wait = true;
  if (job.request().scheduling().gang()) {
    // A gang starts together or not at all: the rest of this attempt is stopped where it
    // was sent, and waits to be placed again with the replica that could not start.
    for (int i = 0; i < job.replicas_size(); ++i) {
      auto* other = job.mutable_replicas(i);
      if (i == index || Ended(other->state()) || other->state() == v1::ReplicaRecord::WAITING) continue;
      StopAttempt(*other, now, fx);
      other->set_attempt(other->attempt() + 1);
      other->set_state(v1::ReplicaRecord::WAITING);
      other->clear_center_id();
      other->clear_dispatched_at();
      *other->mutable_restart_after() = ToTimestamp(now);  // waits from now, as its gang's retry
      other->set_message(absl::StrCat("requeued with its gang: task ", rep->task_index(), " replica ",
                                      rep->replica_index(), " could not start on ", center, ": ", why));
    }
  }
  Settle(job, now, fx);
}

std::vector<std::string> HeldRefusals(const v1::ReplicaRecord& r, absl::Time now) {
  if (r.refused_centers_size() == 0 || now - FromTimestamp(r.refused_at()) >= scheduler::kRefusalHold) {
    return {};  // none, or even the latest is past its hold
  }
  std::vector<std::string> held;
  for (int i = 0; i < r.refused_centers_size(); ++i) {
    const auto& at = i < r.refusal_times_size() ? r.refusal_times(i) : r.refused_at();
    if (now - FromTimestamp(at) < scheduler::kRefusalHold) held.push_back(r.refused_centers(i));
  }
  return held;
}

bool AskWithdraw(v1::JobRecord& job, int index, const std::string& why, absl::Time now, JobEffects* fx) {
  auto* rep = job.mutable_replicas(index);
  if (rep->state() != v1::ReplicaRecord::PENDING || job.stop_requested()) return false;
  v1::AttemptRecord* a = nullptr;
  for (auto& x : *rep->mutable_attempts()) {
    if (x.attempt() == rep->attempt()) a = &x;
  }
  if (a == nullptr || a->closed() || a->has_started_at() || a->has_withdraw_asked_at()) return false;
  *a->mutable_withdraw_asked_at() = ToTimestamp(now);
  a->set_message(why);
  rep->set_message(absl::StrCat("moving: ", why));
  *job.mutable_updated_at() = ToTimestamp(now);
  fx->changed = true;
  return true;
}

void ApplyWithdrawn(v1::JobRecord& job, int index, absl::Time now, JobEffects* fx) {
  auto* rep = job.mutable_replicas(index);
  // Only a replica that never started there: one seen running is never taken back.
  if (rep->state() != v1::ReplicaRecord::PENDING && rep->state() != v1::ReplicaRecord::DISPATCHING) return;
  const std::string center = rep->center_id();
  std::string why;
  for (auto& a : *rep->mutable_attempts()) {
    if (a.attempt() != rep->attempt()) continue;
    why = a.message();
    if (!a.closed()) {  // the report closes it first; the answer to the ask may not
      a.set_closed(true);
      a.set_outcome("withdrawn");
      a.clear_started_at();
      *a.mutable_ended_at() = ToTimestamp(now);
      *a.mutable_seen_ended_at() = ToTimestamp(now);
    }
  }
  auto requeue = [&](v1::ReplicaRecord* r, const std::string& message) {
    r->set_moves(r->moves() + 1);
    if (!r->center_id().empty()) r->add_moved_from(r->center_id());
    r->set_attempt(r->attempt() + 1);
    r->set_state(v1::ReplicaRecord::WAITING);
    r->clear_center_id();
    r->clear_dispatched_at();
    r->clear_exit_code();
    r->set_message(message);
  };
  fx->release.push_back(AttemptOf(*rep));
  requeue(rep, absl::StrCat("moved from ", center, ": ", why));
  if (job.request().scheduling().gang()) {
    // A gang moves whole: its other replicas (one job of the center's scheduler, withdrawn
    // with this one) are stopped where they were and placed again with it.
    for (int i = 0; i < job.replicas_size(); ++i) {
      auto* other = job.mutable_replicas(i);
      if (i == index || Ended(other->state()) || other->state() == v1::ReplicaRecord::WAITING) continue;
      StopAttempt(*other, now, fx);
      requeue(other, absl::StrCat("moved with its gang from ", center, ": ", why));
    }
  }
  fx->wait = true;
  fx->changed = true;
  *job.mutable_updated_at() = ToTimestamp(now);
  Settle(job, now, fx);
}

void ApplyStopRequested(v1::JobRecord& job, absl::Time now, JobEffects* fx) {
  job.set_stop_requested(true);
  fx->changed = true;
  *job.mutable_updated_at() = ToTimestamp(now);
  Settle(job, now, fx);
}

void ApplyScale(v1::JobRecord& job, int task_index, int replicas, absl::Time now, JobEffects* fx) {
  auto* task = job.mutable_request()->mutable_tasks(task_index);
  const int before = task->replica_number();
  if (replicas == before || JobEnded(job)) return;
  const std::string why = absl::StrCat("scaled from ", before, " to ", replicas, " replicas");
  if (replicas > before) {
    for (int index = before; index < replicas; ++index) {
      v1::ReplicaRecord* r = nullptr;
      for (auto& x : *job.mutable_replicas()) {
        if (x.task_index() == task_index && x.replica_index() == index) r = &x;
      }
      if (r == nullptr) {
        // Appended: positions of the replicas there are stay as they are (submits in flight
        // name their replica by position).
        r = job.add_replicas();
        r->set_task_index(task_index);
        r->set_replica_index(index);
      } else {
        // Scaled away before: it starts again as a new attempt (its old one may still be
        // ending at its center, and is metered under its own key).
        TrimAttempts(*r);
        r->set_attempt(r->attempt() + 1);
        r->clear_endpoints();
        r->set_scaled_away(false);
        r->clear_center_id();
        r->clear_dispatched_at();
        r->clear_exit_code();
        r->set_moves(0);
        r->clear_moved_from();
      }
      r->set_state(v1::ReplicaRecord::WAITING);
      // It waits from now: a service submitted days ago is not overdue the moment it grows
      // (WaitingSince), and it is due at once — unless it was scaled away while backing off:
      // a scale down and up again does not cut a crash loop's back-off short (its count of
      // restarts in a row stays too).
      const bool backing_off = r->has_restart_after() && FromTimestamp(r->restart_after()) > now;
      if (!backing_off) *r->mutable_restart_after() = ToTimestamp(now);
      r->set_message(absl::StrCat("waiting to be placed: ", why));
    }
    fx->wait = true;
  } else {
    for (auto& r : *job.mutable_replicas()) {
      if (r.task_index() != task_index || r.replica_index() < replicas || r.scaled_away()) continue;
      if (r.state() != v1::ReplicaRecord::WAITING && !Ended(r.state())) StopAttempt(r, now, fx);
      r.set_state(v1::ReplicaRecord::STOPPED);
      r.set_scaled_away(true);  // its restart_after stays: scaled up again, it keeps its back-off
      for (auto& e : *r.mutable_endpoints()) e.set_ready(false);  // it serves nothing any more
      r.set_message(absl::StrCat("stopped: ", why));
    }
  }
  task->set_replica_number(replicas);
  *job.mutable_updated_at() = ToTimestamp(now);
  fx->changed = true;
  Settle(job, now, fx);
}

void ApplyUnplaceable(v1::JobRecord& job, const std::string& why, absl::Time now, JobEffects* fx) {
  for (auto& rep : *job.mutable_replicas()) {
    if (rep.state() != v1::ReplicaRecord::WAITING) continue;
    rep.set_state(v1::ReplicaRecord::FAILED);
    rep.set_message(why);
  }
  fx->changed = true;
  *job.mutable_updated_at() = ToTimestamp(now);
  Settle(job, now, fx);
}

}  // namespace jc::jobs
