#include "services/jobs/attempt_history.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/timestamp.h"

#include <algorithm>
#include <utility>

namespace jc::jobs {
namespace {

v1::AttemptRecord* Find(v1::ReplicaRecord* rep, int attempt) {
  for (auto& a : *rep->mutable_attempts()) {
    if (a.attempt() == attempt) return &a;
  }
  return nullptr;
}

bool Terminal(apb::ReplicaState s) {
  return s == apb::REPLICA_SUCCEEDED || s == apb::REPLICA_FAILED || s == apb::REPLICA_STOPPED;
}

const char* OutcomeOf(apb::ReplicaState s) {
  switch (s) {
    case apb::REPLICA_SUCCEEDED:
      return "succeeded";
    case apb::REPLICA_FAILED:
      return "failed";
    default:
      return "stopped";
  }
}

// A start the center reports, within what the control plane saw: not before it sent the
// attempt's submit, not after now (budgets count a running attempt's cost from it).
bool Earlier(const google::protobuf::Timestamp& a, const google::protobuf::Timestamp& b) {
  return std::make_pair(a.seconds(), a.nanos()) < std::make_pair(b.seconds(), b.nanos());
}

google::protobuf::Timestamp SeenStart(const v1::AttemptRecord& a, const google::protobuf::Timestamp& reported,
                                      absl::Time now) {
  absl::Time t = std::min(FromTimestamp(reported), now);
  if (a.has_submitted_at()) t = std::max(t, FromTimestamp(a.submitted_at()));
  else if (a.has_placed_at()) t = std::max(t, FromTimestamp(a.placed_at()));
  return ToTimestamp(t);
}

// When the center says the attempt ended, bounded by what was seen: not after now (a center
// cannot report an end to come), not before it started (or was handed over). Unbounded, a
// time past 9999 was stored and every list holding the job answered 500 (helper-50 F5).
google::protobuf::Timestamp SeenEnd(const v1::AttemptRecord& a, const google::protobuf::Timestamp& reported,
                                    absl::Time now) {
  absl::Time t = std::min(FromTimestamp(reported), now);
  absl::Time floor = absl::UnixEpoch();
  if (a.has_started_at()) {
    floor = FromTimestamp(a.started_at());
  } else if (a.has_submitted_at()) {
    floor = FromTimestamp(a.submitted_at());
  } else if (a.has_placed_at()) {
    floor = FromTimestamp(a.placed_at());
  }
  return ToTimestamp(std::max(t, floor));
}

}  // namespace

bool Ran(const v1::AttemptRecord& a) { return a.has_started_at(); }

void NotePlaced(v1::JobRecord& job, int index, absl::Time now) {
  auto* rep = job.mutable_replicas(index);
  v1::AttemptRecord* a = Find(rep, rep->attempt());
  if (a == nullptr) {
    a = rep->add_attempts();
    a->set_attempt(rep->attempt());
  }
  // Placed again under the same attempt (its staging or submit was retried elsewhere is a
  // new attempt; the same attempt re-placed happens only after a restart): the last place.
  a->set_center_id(rep->center_id());
  *a->mutable_placed_at() = ToTimestamp(now);
  *a->mutable_submitted_at() = ToTimestamp(now);  // sent once committed, unless staged first
}

void NoteStaged(v1::JobRecord& job, int index, absl::Time now) {
  auto* rep = job.mutable_replicas(index);
  v1::AttemptRecord* a = Find(rep, rep->attempt());
  if (a == nullptr || !a->has_placed_at()) return;
  a->set_transfer_seconds(std::max(0.0, absl::ToDoubleSeconds(now - FromTimestamp(a->placed_at()))));
  *a->mutable_submitted_at() = ToTimestamp(now);  // its submit is sent once this is committed
}

bool ApplyAttemptReport(v1::JobRecord& job, int index, const std::string& center, const apb::Replica& report,
                        absl::Time now, JobEffects* fx) {
  auto* rep = job.mutable_replicas(index);
  const int attempt = report.key().attempt();
  v1::AttemptRecord* a = Find(rep, attempt);
  if (a == nullptr) {
    // Placed before attempts were recorded: the replica's current attempt, where it is.
    if (attempt != rep->attempt() || rep->center_id() != center || rep->state() == v1::ReplicaRecord::WAITING) {
      return false;
    }
    a = rep->add_attempts();
    a->set_attempt(attempt);
    a->set_center_id(center);
    // What bounds its bill: its acknowledgement at the latest, else from now.
    *a->mutable_submitted_at() = rep->has_dispatched_at() ? rep->dispatched_at() : ToTimestamp(now);
    if (rep->state() == v1::ReplicaRecord::RUNNING) {
      // It was seen running: it ran, since its acknowledgement at the latest.
      *a->mutable_started_at() = rep->has_dispatched_at() ? rep->dispatched_at() : ToTimestamp(now);
    }
    fx->changed = true;
  }
  if (a->center_id() != center) return false;
  if (a->closed() && a->estimated() && Terminal(report.state())) {
    // The center's word after the control plane's estimate: a record that corrects it.
    v1::AttemptRecord estimate = *a;
    a->set_estimated(false);
    // What it may bill ends when the control plane first learnt the end: the estimate's close.
    if (!a->has_seen_ended_at()) *a->mutable_seen_ended_at() = ToTimestamp(now);
    if (report.has_started_at()) *a->mutable_started_at() = SeenStart(*a, report.started_at(), now);
    *a->mutable_ended_at() = report.has_ended_at() ? SeenEnd(*a, report.ended_at(), now) : ToTimestamp(now);
    if (a->has_started_at() && FromTimestamp(a->ended_at()) < FromTimestamp(a->started_at())) {
      *a->mutable_ended_at() = a->started_at();
    }
    a->set_outcome(OutcomeOf(report.state()));
    a->set_exit_code(report.exit_code());
    MeteredAttempt m{index, *a, report.usage()};
    m.correction = true;
    m.estimate = std::move(estimate);
    fx->metered.push_back(std::move(m));
    fx->changed = true;
    return true;
  }
  if (a->closed()) return true;  // a repeated or late report: already accounted for
  const bool withdrawn = WithdrawnAsAsked(*a, report);
  const bool terminal = Terminal(report.state());
  // Started: the center says when, or it runs (or ran, by what it measured) now.
  bool started = report.has_started_at() || report.state() == apb::REPLICA_RUNNING ||
                 (terminal && report.usage().wall_seconds() > 0);
  // The center's clock, within ours; once set it only moves earlier: a center that reported
  // a later start at every poll would keep an attempt "fresh" (never past its budget
  // reservation, its running cost near nothing).
  if (report.has_started_at() &&
      (!a->has_started_at() || Earlier(SeenStart(*a, report.started_at(), now), a->started_at()))) {
    *a->mutable_started_at() = SeenStart(*a, report.started_at(), now);
    fx->changed = true;
  } else if (started && !a->has_started_at()) {
    *a->mutable_started_at() = ToTimestamp(now);
    fx->changed = true;
  }
  if (!terminal) return true;
  *a->mutable_ended_at() = report.has_ended_at() ? SeenEnd(*a, report.ended_at(), now) : ToTimestamp(now);
  // Two clocks (the center's end, a start held to our submit): never an end before the start.
  if (a->has_started_at() && FromTimestamp(a->ended_at()) < FromTimestamp(a->started_at())) {
    *a->mutable_ended_at() = a->started_at();
  }
  a->set_outcome(OutcomeOf(report.state()));
  a->set_exit_code(report.exit_code());
  // Withdrawn as asked, it keeps why it was asked back (the move's reason).
  if (absl::StartsWith(a->message(), kGivenUp)) {
    a->set_message(absl::StrCat(a->message(), "; then its center said: ", report.message()));
  } else if (!withdrawn) {
    a->set_message(report.message());
  }
  a->set_closed(true);
  *a->mutable_seen_ended_at() = ToTimestamp(now);
  if (withdrawn) {
    // Taken back before it started, as the control plane asked: it never ran (a start or
    // usage said beside "withdrawn" is not billed).
    a->set_outcome("withdrawn");
    a->clear_started_at();
    *a->mutable_ended_at() = ToTimestamp(now);
  } else if (Ran(*a)) {
    a->set_metered(true);
    fx->metered.push_back({index, *a, report.usage()});
  }
  fx->changed = true;
  return true;
}

bool WithdrawnAsAsked(const v1::AttemptRecord& attempt, const apb::Replica& report) {
  // Asked back, never seen started, and it ended saying it never started either: taken back
  // (its center's "withdrawn", or the end of a withdrawal whose answer was lost: nexec's
  // "killed while pending", Slurm's CANCELLED). A start seen earlier is never erased by a
  // later "withdrawn": that replica ran.
  const bool ended = report.state() == apb::REPLICA_STOPPED || report.state() == apb::REPLICA_FAILED;
  return attempt.has_withdraw_asked_at() && !attempt.has_started_at() && ended && !report.has_started_at() &&
         report.usage().wall_seconds() <= 0;
}

void ApplyAttemptUnknown(v1::JobRecord& job, int index, const std::string& center, int attempt, absl::Time now,
                         JobEffects* fx, const std::string& why) {
  v1::AttemptRecord* a = Find(job.mutable_replicas(index), attempt);
  if (a == nullptr || a->closed() || a->center_id() != center) return;
  a->set_closed(true);
  if (!a->has_ended_at()) *a->mutable_ended_at() = ToTimestamp(now);
  if (!why.empty()) {
    a->set_message(why);
  } else if (a->message().empty()) {
    a->set_message("its center does not know it: it never ran there");
  }
  // A start the control plane saw but the center no longer knows: nothing the center can
  // bill; reconciliation lists it (the center lost its own record).
  fx->changed = true;
}

void CloseNeverStarted(v1::JobRecord& job, int index, const std::string& why, absl::Time now) {
  auto* rep = job.mutable_replicas(index);
  v1::AttemptRecord* a = Find(rep, rep->attempt());
  if (a == nullptr || a->closed()) return;
  a->set_closed(true);
  a->set_outcome("failed");
  a->set_message(why);
  *a->mutable_ended_at() = ToTimestamp(now);
}

void NoteGivenUp(v1::ReplicaRecord& replica, const std::string& why) {
  v1::AttemptRecord* a = Find(&replica, replica.attempt());
  if (a != nullptr && !a->closed()) a->set_message(absl::StrCat(kGivenUp, why));
}

void NoteStopped(v1::ReplicaRecord& replica, absl::Time now) {
  v1::AttemptRecord* a = Find(&replica, replica.attempt());
  if (a != nullptr && !a->closed() && !a->has_stopped_at()) *a->mutable_stopped_at() = ToTimestamp(now);
}

void CloseOverdue(v1::JobRecord& job, absl::Time now, absl::Duration grace, JobEffects* fx) {
  for (int i = 0; i < job.replicas_size(); ++i) {
    for (auto& a : *job.mutable_replicas(i)->mutable_attempts()) {
      if (a.closed() || !a.has_stopped_at() || now - FromTimestamp(a.stopped_at()) < grace) continue;
      a.set_closed(true);
      *a.mutable_ended_at() = a.stopped_at();
      *a.mutable_seen_ended_at() = ToTimestamp(now);
      a.set_outcome("stopped");
      a.set_message("its center never reported the end: the control plane's own times stand in");
      if (Ran(a)) {
        a.set_metered(true);
        a.set_estimated(true);
        MeteredAttempt m{i, a, apb::ReplicaUsage()};
        m.estimated = true;
        fx->metered.push_back(std::move(m));
      }
      fx->changed = true;
    }
  }
}

std::vector<AttemptRef> OpenAttempts(const v1::JobRecord& job) {
  std::vector<AttemptRef> out;
  for (const auto& rep : job.replicas()) {
    for (const auto& a : rep.attempts()) {
      if (!a.closed()) out.push_back({a.center_id(), rep.task_index(), rep.replica_index(), a.attempt()});
    }
  }
  return out;
}

bool AwaitsUsage(const v1::JobRecord& job) {
  for (const auto& rep : job.replicas()) {
    for (const auto& a : rep.attempts()) {
      if (!a.closed()) return true;
    }
  }
  return false;
}

}  // namespace jc::jobs
