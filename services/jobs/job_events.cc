#include "services/jobs/job_events.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/timestamp.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {

namespace {

constexpr int64_t kStorePage = 1000;
constexpr int64_t kPruneEvery = 1024;  // events between two prunes

bool IsEnded(const std::string& status) { return status == kCompleted || status == kFailed; }

v1::ReplicaChange ChangeOf(const v1::ReplicaRecord& r, const v1::ReplicaRecord* before) {
  v1::ReplicaChange c;
  c.set_task_index(r.task_index());
  c.set_replica_index(r.replica_index());
  c.set_status(ReplicaStatus(r.state()));
  c.set_phase(PhaseName(r.state()));
  c.set_center_id(r.center_id());
  c.set_attempt(r.attempt());
  c.set_exit_code(r.exit_code());
  c.set_message(r.message());
  if (before != nullptr) c.set_previous_phase(PhaseName(before->state()));
  return c;
}

// Memory never keeps more than the store: a cursor the store dropped is refused everywhere.
JobEventsOptions Clamped(JobEventsOptions o) {
  o.retention = std::max<int64_t>(1, o.retention);
  o.memory_window = std::max<size_t>(1, std::min<size_t>(o.memory_window, static_cast<size_t>(o.retention)));
  return o;
}

}  // namespace

std::string PhaseName(v1::ReplicaRecord::State state) {
  return absl::AsciiStrToLower(v1::ReplicaRecord::State_Name(state));
}

std::optional<v1::TrainJobEvent> EventOf(const v1::JobRecord* before, const v1::JobRecord& after, absl::Time at) {
  v1::TrainJobEvent e;
  e.set_job_id(after.job_id());
  e.set_status(after.status());
  e.set_status_reason(after.status_reason());
  e.set_project(after.request().project());
  e.set_name(after.request().name());
  *e.mutable_at() = ToTimestamp(at);
  if (before == nullptr) {
    e.set_type(v1::TrainJobEvent::CREATED);
    for (const auto& r : after.replicas()) *e.add_replicas() = ChangeOf(r, nullptr);
    return e;
  }
  e.set_previous_status(before->status());
  for (int i = 0; i < after.replicas_size(); ++i) {
    const v1::ReplicaRecord& r = after.replicas(i);
    const v1::ReplicaRecord* b = i < before->replicas_size() ? &before->replicas(i) : nullptr;
    if (b != nullptr && b->state() == r.state() && b->center_id() == r.center_id() && b->attempt() == r.attempt()) {
      continue;
    }
    *e.add_replicas() = ChangeOf(r, b);
  }
  bool changed = before->status() != after.status() || before->status_reason() != after.status_reason() ||
                 e.replicas_size() > 0;
  if (!changed) return std::nullopt;
  e.set_type(IsEnded(after.status()) && !IsEnded(before->status()) ? v1::TrainJobEvent::ENDED
                                                                    : v1::TrainJobEvent::UPDATED);
  return e;
}

std::vector<v1::TrainJobEvent> MovedEventsOf(const v1::JobRecord* before, const v1::JobRecord& after, absl::Time at) {
  std::vector<v1::TrainJobEvent> out;
  if (before == nullptr) return out;
  for (int i = 0; i < after.replicas_size(); ++i) {
    const v1::ReplicaRecord& r = after.replicas(i);
    const v1::ReplicaRecord* b = i < before->replicas_size() ? &before->replicas(i) : nullptr;
    // Placed by this change: it has a center now, and had none (or another attempt) before.
    if (r.center_id().empty() || (b != nullptr && b->attempt() == r.attempt() && !b->center_id().empty())) continue;
    // Its previous attempt was taken back as asked: this placement is the move's. A
    // placement after a failure to start has a previous attempt that was never asked back.
    const v1::AttemptRecord* left = nullptr;
    for (const auto& a : r.attempts()) {
      if (a.attempt() == r.attempt() - 1) left = &a;
    }
    if (left == nullptr || !left->has_withdraw_asked_at() || left->has_started_at()) continue;
    v1::TrainJobEvent e;
    e.set_type(v1::TrainJobEvent::MOVED);
    e.set_job_id(after.job_id());
    e.set_status(after.status());
    e.set_previous_status(before->status());
    e.set_status_reason(after.status_reason());
    e.set_project(after.request().project());
    e.set_name(after.request().name());
    *e.mutable_at() = ToTimestamp(at);
    *e.add_replicas() = ChangeOf(r, b);
    v1::ReplicaMove* move = e.mutable_move();
    move->set_task_index(r.task_index());
    move->set_replica_index(r.replica_index());
    move->set_from_center_id(left->center_id());
    move->set_to_center_id(r.center_id());
    move->set_attempt(r.attempt());
    move->set_reason(left->message());
    out.push_back(std::move(e));
  }
  return out;
}

std::string EncodeEvent(const v1::TrainJobEvent& event) { return store::EncodeBinaryDoc(event); }

absl::StatusOr<v1::TrainJobEvent> DecodeEvent(const std::optional<std::string>& column) {
  return store::DecodeAnyDoc<v1::TrainJobEvent>(column);
}

JobEvents::JobEvents(store::Store* store, JobEventsOptions options)
    : store_(store), options_(Clamped(options)), log_(options_.memory_window) {}

absl::StatusOr<std::pair<uint64_t, uint64_t>> JobEvents::StoredRange() {
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT MIN(revision), MAX(revision) FROM job_events"));
  uint64_t min = 0, max = 0;
  if (!rows.empty() && rows[0][0].has_value() &&
      (!absl::SimpleAtoi(*rows[0][0], &min) || !rows[0][1].has_value() || !absl::SimpleAtoi(*rows[0][1], &max))) {
    return absl::DataLossError("job_events holds a revision that is not a number");
  }
  return std::make_pair(min, max);
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> JobEvents::RecentStoredRange() {
  std::lock_guard<std::mutex> lock(range_mu_);
  absl::Time now = absl::Now();
  if (now - range_at_ > absl::Milliseconds(200)) {
    JC_ASSIGN_OR_RETURN(range_, StoredRange());
    range_at_ = now;
  }
  return range_;
}

namespace {

// Rows of job_events (their doc column) as events, in the rows' order.
absl::StatusOr<std::vector<v1::TrainJobEvent>> DecodeRows(const store::Rows& rows) {
  std::vector<v1::TrainJobEvent> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    JC_ASSIGN_OR_RETURN(auto event, DecodeEvent(row[0]));
    out.push_back(std::move(event));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<v1::TrainJobEvent>> JobEvents::ReadStore(uint64_t since, int64_t limit) {
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      store_->Query("SELECT doc FROM job_events WHERE revision > $1 ORDER BY revision LIMIT $2",
                                    {static_cast<int64_t>(since), limit}));
  return DecodeRows(rows);
}

absl::StatusOr<std::vector<v1::TrainJobEvent>> JobEvents::OfJob(const std::string& job_id, uint64_t upto) {
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      store_->Query("SELECT doc FROM job_events WHERE job_id = $1 AND revision <= $2 ORDER BY revision",
                                    {job_id, static_cast<int64_t>(upto)}));
  return DecodeRows(rows);
}

absl::Status JobEvents::Restore() {
  JC_ASSIGN_OR_RETURN(auto range, StoredRange());
  JC_ASSIGN_OR_RETURN(auto newest,
                      ReadStore(range.second > options_.memory_window ? range.second - options_.memory_window : 0,
                                static_cast<int64_t>(options_.memory_window)));
  next_ = std::max(next_, range.second);
  pruned_at_ = static_cast<int64_t>(next_);
  log_.RestoreStamped(std::move(newest), next_);
  live_ = true;
  return absl::OkStatus();
}

int64_t JobEvents::PruneBelow() {
  int64_t next = static_cast<int64_t>(next_);
  if (next - pruned_at_ < std::min(kPruneEvery, options_.retention) || next <= options_.retention) return 0;
  pruned_at_ = next;
  return next - options_.retention;
}

absl::StatusOr<uint64_t> JobEvents::LastRevision() {
  if (live_) return log_.last_revision();
  JC_ASSIGN_OR_RETURN(auto range, StoredRange());
  return range.second;
}

absl::StatusOr<std::vector<v1::TrainJobEvent>> JobEvents::Read(uint64_t since, absl::Duration timeout) {
  auto ahead = [since](uint64_t newest) {
    return absl::OutOfRangeError(absl::StrCat("revision ", since, " is ahead of the newest event (", newest,
                                              "): re-read the job and watch from revision 0"));
  };
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (closed_) return absl::UnavailableError("the server is shutting down");
    if (live_) {
      if (uint64_t newest = log_.last_revision(); since > newest) return ahead(newest);
      std::vector<v1::TrainJobEvent> out;
      auto read = log_.WaitAfter(since, std::min(timeout, absl::Seconds(1)), &out);
      if (read == EventLog<v1::TrainJobEvent>::Read::kClosed) {
        return absl::UnavailableError("the server is shutting down");
      }
      if (read == EventLog<v1::TrainJobEvent>::Read::kOk) {
        if (!out.empty() || absl::Now() >= deadline) {
          if (out.size() > static_cast<size_t>(kStorePage)) out.resize(kStorePage);
          return out;
        }
        continue;
      }
      // Older than memory keeps: the store may still have them (below).
    }
    // Many watchers poll here on a standby: they share one look at the store's range (at
    // most 200 ms old) to see that nothing came; what decides is read fresh.
    if (!live_) {
      JC_ASSIGN_OR_RETURN(auto recent, RecentStoredRange());
      if (since == recent.second) {
        if (absl::Now() >= deadline) return std::vector<v1::TrainJobEvent>();
        absl::SleepFor(std::min(absl::Milliseconds(250), deadline - absl::Now()));
        continue;
      }
    }
    JC_ASSIGN_OR_RETURN(auto range, StoredRange());
    if (!live_ && since > range.second) return ahead(range.second);
    if (range.first > 0 && since + 1 < range.first) {
      return absl::OutOfRangeError(absl::StrCat("the events after revision ", since,
                                                " are no longer kept (the oldest kept is ", range.first,
                                                "): re-read the job and watch from revision 0"));
    }
    JC_ASSIGN_OR_RETURN(auto out, ReadStore(since, kStorePage));
    if (!out.empty() || absl::Now() >= deadline) return out;
    if (live_) continue;
    // Another instance leads and writes the events: look again shortly.
    absl::SleepFor(std::min(absl::Milliseconds(250), deadline - absl::Now()));
  }
}

}  // namespace jc::jobs
