#include "services/jobs/job_manager.h"

#include "services/accounting/rating.h"

#include "absl/container/flat_hash_map.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/estimator/job_class.h"
#include "services/jobs/endpoint_token.h"
#include "services/jobs/job_kind.h"
#include "common/audit/audit_log.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/timestamp.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/usage_bounds.h"
#include "services/jobs/job_state.h"
#include "services/jobs/job_view.h"
#include "services/jobs/usage_record.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {

namespace {

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

bool Transient(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kDeadlineExceeded ||
         s.code() == absl::StatusCode::kResourceExhausted || s.code() == absl::StatusCode::kAborted ||
         // the adapter's server went away mid-call (a restart, an impostor stopped): the
         // submit may or may not have landed, and a resubmit of the replica's key is safe
         s.code() == absl::StatusCode::kCancelled ||
         // refused by us, not by the center: its adapter has not proved it yet
         southbound::IsUnprovenAdapter(s);
}

}  // namespace

JobManager::JobManager(store::Store* store, scheduler::Scheduler* scheduler, registry::CenterDirectory* centers,
                       southbound::AdapterClient* adapters, DataMover* mover, const Clock* clock, JobManagerOptions options)
    : store_(store),
      jobs_(store),
      scheduler_(scheduler),
      adapters_(adapters),
      mover_(mover),
      clock_(clock),
      options_(options),
      addresses_(centers, clock),
      events_(store, options.events),
      dispatcher_(adapters, &addresses_, &pool_,
                  [this](const std::string& center, std::vector<SubmitItem> items,
                         std::vector<absl::StatusOr<apb::Replica>> results) {
                    // The hand-over happened when the answer arrived: the loop may be busy
                    // committing the next burst and take it a few milliseconds later.
                    loop_.Post([this, center, items = std::move(items), results = std::move(results),
                                posted = std::chrono::steady_clock::now(), answered_at = clock_->Now()]() mutable {
                      if (metrics_) {
                        metrics_->handover_loop->Observe(
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - posted).count());
                      }
                      OnSubmitAnswers(center, std::move(items), std::move(results), answered_at);
                    });
                  }),
      stager_(adapters, &addresses_, mover, &pool_),
      tracker_(adapters, &addresses_, &pool_,
               {[this](const std::string& center, uint64_t term, const apb::ReplicaEvent& e) {
                  loop_.Post([this, center, term, e] { OnEvent(center, term, e); });
                },
                [this](const std::string& center, uint64_t term) {
                  if (metrics_) metrics_->watch_resyncs->Increment();
                  loop_.Post([this, center, term] {
                    if (term != term_) return;
                    cursors_[center] = 0;
                    OnReconcile(true, {});
                  });
                }}),
      pool_(std::max(1, options.dispatch_threads)) {}

JobManager::~JobManager() { Stop(); }

namespace {

std::string DefaultInstanceId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == 0) return "jointcloud";
  return host;
}

}  // namespace

absl::Status JobManager::Start() {
  std::string instance = options_.instance_id.empty() ? DefaultInstanceId() : options_.instance_id;
  leadership_ = std::make_unique<store::Leadership>(store_, "jobs", instance, options_.lease_ttl);
  jobs_.FenceWith(&leadership_->lease());
  absl::StatusOr<std::string> origin = jobs_.Identity();
  if (!origin.ok()) return origin.status();
  origin_ = *origin;
  loop_.Start("jc-jobs-loop", [this] { Flush(); });
  std::string why;
  if (leadership_->Take(absl::Now(), &why)) {
    // Leads before Start returns, so that the first create is taken.
    absl::Status led = BeginLead()->get_future().get();
    if (!led.ok()) return led;
  } else {
    spdlog::warn("job manager: {}", why);
    SetNotLeading(why);
  }
  // Project quotas and budgets, read beside the decisions through the services that own
  // them: a failed read keeps the ones read before.
  auto read_quotas = [this] {
    if (admission_reads_ == nullptr) return;
    auto projects = admission_reads_->Projects();
    if (!projects.ok()) {
      spdlog::warn("job manager: project quotas not read (the ones read before stay): {}",
                   projects.status().ToString());
      return;
    }
    std::map<std::string, v1::ProjectQuota> quotas;
    std::map<std::string, v1::ProjectBudget> budgets;
    for (const v1::Project& project : *projects) {
      const v1::ProjectQuota& q = project.quota();
      if (q.max_running_gpus() > 0 || q.max_running_cpus() > 0 || q.max_queued_jobs() > 0 || q.max_priority() > 0) {
        quotas[project.name()] = q;
      }
      if (project.budget().monthly() > 0) budgets[project.name()] = project.budget();
    }
    loop_.Post([this, quotas = std::move(quotas)]() mutable { SetQuotas(std::move(quotas)); });
    // Budgets: what each budgeted project's attempts that ended this month cost.
    absl::CivilMonth month = absl::ToCivilMonth(clock_->Now(), absl::UTCTimeZone());
    std::map<std::string, double> ended;
    if (!budgets.empty()) {
      auto spent = admission_reads_->SpentByProject(absl::CivilDay(month), absl::CivilDay(month + 1));
      if (!spent.ok()) {
        spdlog::warn("job manager: budgets not read (the ones read before stay): {}", spent.status().ToString());
        return;
      }
      for (const auto& [project, cost] : *spent) {
        if (budgets.count(project)) ended[project] = cost;
      }
    }
    loop_.Post([this, m = absl::FormatCivilTime(month), budgets = std::move(budgets), ended = std::move(ended)]() mutable {
      SetBudgets(std::move(m), std::move(budgets), std::move(ended));
    });
  };
  read_quotas();
  quota_reader_.Start(options_.quota_refresh, read_quotas, "jc-quotas");
  // The cycle runs whether this instance leads or not: standing by, it tries to lead.
  cycle_.Start(options_.cycle_interval, [this] { RunCycle(); }, "jc-jobs-cycle");
  poller_.Start(options_.poll_interval, [this] {
    if (!leading_) return;
    loop_.Post([this, connected = tracker_.Connected()] { OnReconcile(false, connected); });
  }, "jc-jobs-poll");
  return absl::OkStatus();
}

void JobManager::Stop() {
  if (stopping_.exchange(true)) return;
  cycle_.Stop();
  poller_.Stop();
  quota_reader_.Stop();
  tracker_.Stop();
  events_.Close();
  loop_.Stop();  // replies still queued are abandoned: their callers answer Unavailable
  // A standby takes over at once rather than after the lease's time to live.
  if (leading_.exchange(false) && leadership_ != nullptr) leadership_->Release();
}

absl::Status JobManager::Ready() {
  if (leading_) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(status_mu_);
  return absl::UnavailableError(not_leading_.empty() ? "the job manager is not leading" : not_leading_);
}

void JobManager::SetNotLeading(const std::string& why) {
  std::lock_guard<std::mutex> lock(status_mu_);
  not_leading_ = why;
}

absl::Status JobManager::StandbyError() {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    why = not_leading_;
  }
  return absl::UnavailableError(absl::StrCat(
      "this jobs instance does not lead, so it takes no creates or stops now: ",
      why.empty() ? "it is starting" : why, ". Retry (the leading instance, or this one once it leads, answers)"));
}

// ---- The cycle thread ----

void JobManager::RunCycle() {
  absl::Time now = absl::Now();
  if (!leading_) {
    if (leading_soon_) return;
    std::string why;
    if (leadership_->Take(now, &why)) {
      spdlog::warn("job manager: the jobs lease is ours ({}); leading", leadership_->lease().holder());
      BeginLead();
    } else if (!why.empty()) {
      SetNotLeading(why);
    }
    return;
  }
  if (absl::Status kept = leadership_->Keep(now); !kept.ok()) {
    loop_.Post([this, why = std::string(kept.message())] { StepDown(why); });
    return;
  }
  // One tick queued at a time: a loop that is busy does not fall further behind.
  if (!tick_posted_.exchange(true)) {
    loop_.Post([this] {
      tick_posted_ = false;
      OnTick();
    });
  }
}

std::shared_ptr<std::promise<absl::Status>> JobManager::BeginLead() {
  leading_soon_ = true;
  auto led = std::make_shared<std::promise<absl::Status>>();
  // On the loop, after every write it made: a create an earlier term committed is in the
  // reload, and one it did not commit was never acknowledged.
  loop_.Post([this, led] {
    absl::StatusOr<Reload> reload = [&]() -> absl::StatusOr<Reload> {
      Reload r;
      // Rows from before the list's center and time columns get them (once: after, none).
      JC_ASSIGN_OR_RETURN(int64_t filled, jobs_.BackfillListColumns());
      if (filled > 0) spdlog::info("job manager: {} jobs given their list columns (created, centers)", filled);
      JC_ASSIGN_OR_RETURN(r.active, jobs_.LoadActive());
      JC_ASSIGN_OR_RETURN(r.max_seq, jobs_.MaxSeq());
      JC_ASSIGN_OR_RETURN(r.cursors, jobs_.Cursors());
      if (estimator_ != nullptr) {
        JC_ASSIGN_OR_RETURN(r.durations, jobs_.LoadDurations(estimator_->max_keys()));
      }
      return r;
    }();
    OnLead(std::move(reload), led);
  });
  return led;
}

// ---- Leading and stepping down (the loop) ----

void JobManager::OnLead(absl::StatusOr<Reload> reload, std::shared_ptr<std::promise<absl::Status>> led) {
  leading_soon_ = false;
  if (!reload.ok()) {
    // The lease stays ours; the next cycle tries again.
    std::string why = absl::StrCat("not leading: reloading the jobs failed (", reload.status().message(), "); retrying");
    spdlog::error("job manager: {}", why);
    SetNotLeading(why);
    led->set_value(reload.status());
    return;
  }
  // Event numbering goes on after the newest stored event (a write of an earlier term
  // that failed may have taken revisions: they stay gaps).
  if (absl::Status restored = events_.Restore(); !restored.ok()) {
    std::string why = absl::StrCat("not leading: reading the job events failed (", restored.message(), "); retrying");
    spdlog::error("job manager: {}", why);
    SetNotLeading(why);
    led->set_value(restored);
    return;
  }
  // What was learned of run times, as committed: what this instance learned in a burst that
  // did not commit is forgotten with it.
  if (estimator_ != nullptr) {
    if (absl::Status loaded = estimator_->Reset(reload->durations); !loaded.ok()) {
      std::string why = absl::StrCat("not leading: the stored run times do not read (", loaded.message(), "); retrying");
      spdlog::error("job manager: {}", why);
      SetNotLeading(why);
      led->set_value(loaded);
      return;
    }
  }
  active_.clear();
  waiting_.Clear();
  resubmit_.clear();
  keys_.clear();
  dirty_.clear();
  burst_ = Burst();
  next_seq_ = std::max(next_seq_, reload->max_seq + 1);
  cursors_ = reload->cursors;
  cursor_written_.clear();
  for (const auto& [center, cursor] : cursors_) cursor_written_[center] = {cursor, absl::Now()};
  std::vector<Dispatch> resend;
  std::vector<std::pair<std::string, apb::ReplicaKey>> stops;
  std::set<std::string> centers;
  std::map<std::string, Snapshot> view;
  for (auto& [record, version] : reload->active) {
    std::string id = record.job_id();
    Active& job = active_[id];
    job.record = std::move(record);
    job.version = version;  // the next write must be newer than the last that landed
    view[id] = std::make_shared<const v1::JobRecord>(job.record);
    if (!job.record.request().idempotency_key().empty()) keys_[job.record.request().idempotency_key()] = id;
    bool waiting = false;
    for (int i = 0; i < job.record.replicas_size(); ++i) {
      const auto& r = job.record.replicas(i);
      if (r.state() == v1::ReplicaRecord::WAITING) waiting = true;
      // Not acknowledged before the restart: submit again under the same key.
      if (r.state() == v1::ReplicaRecord::DISPATCHING) resend.push_back({id, i, r.attempt(), r.center_id()});
      if (r.state() == v1::ReplicaRecord::STAGING) resend.push_back({id, i, r.attempt(), r.center_id(), true});
      if (!r.center_id().empty() && !Ended(r.state())) centers.insert(r.center_id());
      // Stopped, and its center never said it ended (or only the control plane's estimate
      // closed it): the stop may have been lost with the last term; it is sent again.
      for (const auto& a : r.attempts()) {
        if (a.has_stopped_at() && (!a.closed() || a.estimated()) && !a.center_id().empty()) {
          apb::ReplicaKey key;
          key.set_job_id(id);
          key.set_task_index(r.task_index());
          key.set_replica_index(r.replica_index());
          key.set_attempt(a.attempt());
          key.set_origin(job.record.origin());
          stops.emplace_back(a.center_id(), std::move(key));
        }
      }
    }
    if (waiting) waiting_.Put(job.record, Attained(job.record));
  }
  // The records' estimates are from their creation; the history just loaded may say more.
  reestimation_.Restart();
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    view_.swap(view);
  }
  uint64_t term = ++term_;
  leading_ = true;  // creates are taken from here on: job ids continue after the reloaded ones
  // What the listener saw before is gone with the process that led: every interactive job
  // gets a whole idle window from here.
  leading_since_ = clock_->Now();
  SetNotLeading("");
  // What the reloaded jobs hold of their projects' budgets and quotas, before the first
  // create is admitted (a create comes after this handler, on the same loop).
  if (admission_.Counts()) RecountAdmission();
  spdlog::info("job manager: leading (term {}); {} jobs not ended reloaded ({} replicas to submit again)", term,
               active_.size(), resend.size());
  tracker_.Restart(term, cursors_);
  for (const auto& c : centers) tracker_.Follow(c);
  SendDispatches(resend);
  pending_stops_.clear();
  for (const auto& [center, key] : stops) SendStop(center, key);
  // Replicas the store shows at a center may have moved on (or be unknown there) while
  // nobody listened: each is asked once, whatever its event stream says.
  OnReconcile(true, {});
  led->set_value(absl::OkStatus());
}

void JobManager::StepDown(const std::string& why) {
  if (!leading_) return;
  leading_ = false;
  ++term_;
  events_.Pause();
  tracker_.Pause();
  dispatcher_.Clear();
  scheduler_->ClearPasses();  // this term's drains and keeps: the next leader decides its own
  // Reservations of this term's replicas go with them: the next term reloads them.
  for (const auto& [id, job] : active_) {
    for (const auto& rep : job.record.replicas()) {
      if (!rep.center_id().empty()) {
        scheduler_->Forget(
            scheduler::Scheduler::ReservationKey(id, rep.task_index(), rep.replica_index(), rep.attempt()));
      }
    }
  }
  // What this burst decided is dropped with it; its creates and stops are told so.
  for (auto& c : burst_.creates) {
    ForgetReservations(c.job.record, c.dispatches);
    c.reply->Send(absl::UnavailableError(absl::StrCat("the job was not recorded: ", why, "; retry")));
  }
  for (auto& r : burst_.stop_replies) {
    r->Send(absl::UnavailableError(absl::StrCat("the stop or scale was not recorded: ", why, "; retry")));
  }
  burst_ = Burst();
  dirty_.clear();
  {
    std::lock_guard<std::mutex> lock(positions_mu_);
    queue_positions_.clear();  // no queue is passed while standing down
  }
  moves_.Reset();  // answers of this term are dropped; the next term asks again
  pending_stops_.clear();  // the next term sends the stops its reload finds
  // What was learned goes stale from here (the next leader learns on): plans here use the
  // jobs' own figures, and say so, until this instance leads again and reloads.
  if (estimator_ != nullptr) estimator_->Unload();
  // The jobs stay in the view for reads (the last this instance knew, answered while the
  // store is away); nothing changes them until a new term replaces them with the store's.
  waiting_.Clear();
  resubmit_.clear();
  SetNotLeading(absl::StrCat("stepped down: ", why, "; trying to lead again"));
  if (metrics_) metrics_->step_downs->Increment();
  spdlog::error("job manager: stepping down: {}. Nothing more is dispatched or written until this instance leads "
                "again, reloading every job from the store",
                why);
}

// ---- Writes: one batch per burst, acted on once committed ----

void JobManager::Flush() {
  if (!leading_) return;
  JobWrites writes;
  for (const auto& id : dirty_) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    Active& job = it->second;
    absl::StatusOr<std::string> doc = Encode(job);
    if (!doc.ok()) return StepDown(absl::StrCat("encoding job ", id, " failed: ", doc.status().message()));
    burst_.saves.emplace_back(std::make_shared<const v1::JobRecord>(job.record), ++job.version);
    writes.saves.push_back({id, job.record.status(), job.version, std::move(*doc),
                            AwaitsUsage(job.record) ? int64_t{1} : int64_t{0}, CentersColumn(job.record)});
  }
  dirty_.clear();
  // What watchers are told: each saved job against its last committed record (the view).
  absl::Time event_time = clock_->Now();
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    for (const auto& [record, version] : burst_.saves) {
      auto v = view_.find(record->job_id());
      const v1::JobRecord* before = v == view_.end() ? nullptr : v->second.get();
      if (auto e = EventOf(before, *record, event_time)) burst_.events.push_back(std::move(*e));
      // A move has its own event too, after the job's (SPEC A16).
      for (auto& moved : MovedEventsOf(before, *record, event_time)) burst_.events.push_back(std::move(moved));
    }
  }
  for (auto& e : burst_.events) {
    e.set_revision(events_.Take());
    writes.events.push_back({static_cast<int64_t>(e.revision()), e.job_id(), EncodeEvent(e)});
  }
  // A cursor rides along with the jobs its events changed; alone, it is written at most
  // once a second (events replayed after a restart change nothing twice).
  absl::Time now = absl::Now();
  bool jobs_written = !burst_.saves.empty() || !burst_.creates.empty();
  for (const auto& [center, cursor] : cursors_) {
    auto& [written, at] = cursor_written_[center];
    if (cursor <= written || (!jobs_written && now - at < absl::Seconds(1))) continue;
    burst_.cursors[center] = cursor;
    written = cursor;
    at = now;
  }
  if (burst_.empty()) return;
  for (auto& c : burst_.creates) {
    const v1::JobRecord& r = c.job.record;
    absl::StatusOr<std::string> doc = Encode(c.job);
    if (!doc.ok()) return StepDown(absl::StrCat("encoding job ", r.job_id(), " failed: ", doc.status().message()));
    store::Params audit_row;
    if (c.audit.has_value()) {
      c.audit->set_object(absl::StrCat("job_id=", r.job_id()));
      audit_row = audit::AuditLog::Values(*c.audit);
    }
    c.event = *EventOf(nullptr, r, event_time);
    c.event.set_revision(events_.Take());
    writes.inserts.push_back({r.job_id(), r.seq(), r.request().user_name(), r.request().project(), r.status(),
                              r.request().idempotency_key(), c.job.version, AwaitsUsage(r) ? 1 : 0, std::move(*doc),
                              absl::ToUnixMicros(FromTimestamp(r.received_at())), CentersColumn(r), std::move(audit_row),
                              {static_cast<int64_t>(c.event.revision()), r.job_id(), EncodeEvent(c.event)}});
  }
  writes.prune_events_below = events_.PruneBelow();
  writes.cursors = burst_.cursors;
  writes.usage = burst_.usage;
  writes.durations = burst_.durations;
  if (!writes.durations.empty()) {
    const absl::Time now = clock_->Now();
    writes.durations_at = absl::ToUnixSeconds(now);
    // The store holds what memory does: the oldest rows go once the estimator is full.
    writes.keep_durations = learning_.RowsToKeep(now);
  }
  for (const auto& a : burst_.audits) writes.audits.push_back(audit::AuditLog::Values(a));
  Burst burst = std::move(burst_);
  burst_ = Burst();
  // Messages that arrive during the commit gather into the next burst.
  const auto write_start = std::chrono::steady_clock::now();
  WriteOutcome outcome = CommitBurst(jobs_, writes);
  if (metrics_) {
    metrics_->handover_write->Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count());
  }
  AfterCommit(burst, outcome);
}

void JobManager::AfterCommit(Burst& burst, const WriteOutcome& outcome) {
  // Each create is answered by its own row: a committed one is acknowledged (and in the
  // view first, so a read right after the answer finds it, and its event published first,
  // so a watch opened right after the answer starts at or past the job's creation), one
  // not written is not.
  std::vector<std::pair<std::vector<CreateReply>, v1::CreateTrainJobResponse>> acks;
  auto acknowledge_creates = [&acks] {
    for (auto& [replies, response] : acks) {
      for (auto& r : replies) r->Send(response);
    }
  };
  for (size_t i = 0; i < burst.creates.size(); ++i) {
    NewJob& c = burst.creates[i];
    const std::string id = c.job.record.job_id();
    const std::string& key = c.job.record.request().idempotency_key();
    creating_.erase(id);
    std::vector<CreateReply> replies{c.reply};  // and the creates with its key that came meanwhile
    if (auto w = key_waiters_.find(id); w != key_waiters_.end()) {
      replies.insert(replies.end(), w->second.begin(), w->second.end());
      key_waiters_.erase(w);
    }
    const absl::Status& inserted = outcome.inserts[i];
    if (!inserted.ok()) {
      ForgetReservations(c.job.record, c.dispatches);
      if (auto k = keys_.find(key); k != keys_.end() && k->second == id) keys_.erase(k);
      absl::Status answer = inserted.code() == absl::StatusCode::kAlreadyExists
                                ? inserted
                                : absl::UnavailableError(absl::StrCat("the job was not recorded (",
                                                                      inserted.message(), "); retry"));
      for (auto& r : replies) r->Send(answer);
      c.dispatches.clear();
      continue;
    }
    v1::CreateTrainJobResponse response = ResponseOf(c.job.record);
    {
      std::lock_guard<std::mutex> lock(view_mu_);
      view_[id] = c.snapshot;
    }
    bool waits = std::any_of(c.job.record.replicas().begin(), c.job.record.replicas().end(),
                             [](const auto& r) { return r.state() == v1::ReplicaRecord::WAITING; });
    if (waits) {
      waiting_.Put(c.job.record, 0);
      // Something was learned between its estimate and now (a run's end in its burst): the
      // sweep that took it may have run before the job was in the queue.
      if (c.estimated_at != reestimation_.generation()) reestimation_.WaitsAgain(c.job.record.seq());
    }
    active_[id] = std::move(c.job);
    acks.emplace_back(std::move(replies), std::move(response));
  }
  if (!outcome.status.ok()) {
    acknowledge_creates();  // their rows committed; the step-down does not undo them
    for (auto& r : burst.stop_replies) {
      r->Send(absl::UnavailableError(
          absl::StrCat("the stop or scale was not recorded (", outcome.status.message(), "); nothing changed, retry")));
    }
    StepDown(absl::StrCat("writing the job manager's decisions failed: ", outcome.status.message()));
    return;
  }
  for (const auto& [record, version] : burst.saves) {
    const std::string& id = record->job_id();
    bool ended = record->status() == kCompleted || record->status() == kFailed;
    {
      std::lock_guard<std::mutex> lock(view_mu_);
      if (ended) {
        view_.erase(id);  // reads find it in the store from here on
      } else {
        view_[id] = record;
      }
    }
    // Ended jobs leave memory once their final write has committed (a later write of the
    // job on its way forgets it when it lands), and once every attempt they placed has
    // reported its end (its usage record is written with it).
    if (!ended || AwaitsUsage(*record)) continue;
    auto it = active_.find(id);
    if (it != active_.end() && it->second.version == version) {
      const std::string& key = it->second.record.request().idempotency_key();
      if (!key.empty()) keys_.erase(key);
      active_.erase(it);
    }
  }
  if (metrics_) {
    for (const auto& u : burst.usage) {
      const prometheus::Labels labels{{"project", u.project()}, {"center", u.ai_center_id()}};
      metrics_->usage_records->Add(labels).Increment();
      metrics_->usage_gpu_seconds->Add(labels).Increment(u.gpu_seconds());
      metrics_->usage_cost->Add(labels).Increment(u.cost());
    }
    // Counted as committed, from the events that tell watchers: one per replica moved.
    for (const auto& e : burst.events) {
      if (e.type() != v1::TrainJobEvent::MOVED) continue;
      metrics_->moves->Add({{"from", e.move().from_center_id()}, {"to", e.move().to_center_id()}}).Increment();
    }
  }
  // Watchers learn what committed, in revision order.
  std::vector<v1::TrainJobEvent> committed = std::move(burst.events);
  for (size_t i = 0; i < burst.creates.size(); ++i) {
    if (outcome.inserts[i].ok()) committed.push_back(std::move(burst.creates[i].event));
  }
  std::sort(committed.begin(), committed.end(),
            [](const auto& a, const auto& b) { return a.revision() < b.revision(); });
  events_.Publish(std::move(committed));
  acknowledge_creates();
  // Answered once the view has the stop's write: a read right after the answer sees it.
  for (auto& r : burst.stop_replies) r->Send(absl::OkStatus());
  for (const auto& [center, key] : burst.stops) SendStop(center, key);
  for (const auto& [center, key] : burst.drained_stops) StopAfterDrain(center, key);
  for (const Withdrawal& w : burst.withdrawals) {
    uint64_t term = term_;
    pool_.Run([this, term, w] {
      absl::StatusOr<apb::Replica> answer = absl::UnavailableError("the center's adapter has no address");
      if (auto address = addresses_.Of(w.center); address.ok()) {
        answer = adapters_->Withdraw({w.center, *address}, w.key);
      } else {
        answer = address.status();
      }
      loop_.Post([this, term, w, answer = std::move(answer)] {
        if (term != term_ || !leading_) return;  // this term's marks are not that term's
        moves_.OnWithdrawAnswer(w, answer, clock_->Now());
      });
    });
  }
  for (const auto& c : burst.creates) SendDispatches(c.dispatches);
  SendDispatches(burst.dispatches);
}

absl::StatusOr<std::string> JobManager::Encode(Active& job) {
  // Base64 protobuf (ADR 0002's amendment for jobs): the job manager is the only reader of
  // its rows, and writes each job several times on the submit path.
  if (job.request_doc.empty()) job.request_doc = job.record.request().SerializeAsString();
  // Encoded without its request (taken out and put back: no copy), which is appended.
  v1::CreateTrainJobRequest* request = job.record.release_request();
  std::string doc =
      store::EncodeBinaryDocWith(job.record, v1::JobRecord::kRequestFieldNumber, job.request_doc);
  job.record.set_allocated_request(request);
  return doc;
}

void JobManager::ForgetReservations(const v1::JobRecord& r, const std::vector<Dispatch>& dispatches) {
  for (const auto& d : dispatches) {
    const auto& rep = r.replicas(d.replica);
    scheduler_->Forget(
        scheduler::Scheduler::ReservationKey(d.job_id, rep.task_index(), rep.replica_index(), rep.attempt()));
  }
}

void JobManager::SendDispatches(const std::vector<Dispatch>& dispatches) {
  std::vector<SubmitItem> items;
  uint64_t term = term_;
  for (const Dispatch& d : dispatches) {
    tracker_.Follow(d.center_id);
    if (!d.stage) {
      if (auto req = SubmitRequest(d)) {  // still current?
        apb::ReplicaKey key = req->key();
        items.push_back({d, std::move(*req), std::move(key), term});
      }
      continue;
    }
    auto it = active_.find(d.job_id);
    if (it == active_.end()) continue;
    const auto& rep = it->second.record.replicas(d.replica);
    if (rep.state() != v1::ReplicaRecord::STAGING || rep.attempt() != d.attempt) continue;
    const auto& task = it->second.record.request().tasks(rep.task_index());
    // An image with content (rep.image(): by digest) is copied into the center's registry
    // where it has one; elsewhere its hosts pull it at the task's start.
    stager_.Stage(d.center_id, it->second.record.request().project(), task.image_id(), rep.image(), {task.datasets().begin(), task.datasets().end()},
                  [this, d, term](absl::Status staged) {
                    loop_.Post([this, d, term, staged = std::move(staged)] { OnStaged(d, term, staged); });
                  });
  }
  dispatcher_.Submit(std::move(items));
}

// ---- Scheduling ----

void JobManager::OnTick() {
  if (!leading_) return;
  // FCFS by (priority, submission); a job that does not fit does not hold back the
  // ones behind it that do (backfill).
  if (admission_.Counts()) RecountAdmission();
  // Drains and keeps are decided again in queue order every pass; last pass's hold until
  // this one's replace them (an overdue or narrow job placed, or gone, frees its center at
  // the pass's end).
  scheduler_->BeginPass();
  const absl::Time pass_at = clock_->Now();
  auto schedule_one = [this, pass_at](const std::string& id) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    std::string before = it->second.record.waiting_reason();
    auto more = Schedule(it->second);
    // Past the queue's longest wait, and placement found no center for it (not a quota's
    // hold): a center drains for it (its reason says so, the same every pass, so nothing is
    // written again).
    if (more.empty() && found_no_fit_ && Overdue(it->second.record, pass_at)) DrainFor(it->second.record);
    if (!more.empty() || before != it->second.record.waiting_reason()) MarkDirty(id);
    burst_.dispatches.insert(burst_.dispatches.end(), more.begin(), more.end());
  };
  std::vector<std::pair<std::string, std::string>> offered;
  if (options_.queue.fair_share || options_.queue.order != "fcfs") {
    offered = ScheduleQueue(schedule_one);
  } else {
    offered.reserve(waiting_.size());
    for (const auto& [p, since, s, id] : waiting_.in_line()) {
      offered.emplace_back(id, p == 0 ? "" : absl::StrCat("priority ", -p));
    }
    for (const auto& [id, why] : offered) schedule_one(id);
  }
  scheduler_->EndPass();
  if (const absl::Time at = clock_->Now(); at - positions_noted_ >= absl::Seconds(1)) {
    positions_noted_ = at;
    NoteQueuePositions(offered, at);
  }
  // Submits that failed for a passing reason go again.
  for (const auto& [id, index] : resubmit_) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    const auto& rep = it->second.record.replicas(index);
    if (rep.state() == v1::ReplicaRecord::DISPATCHING) {
      burst_.dispatches.push_back({id, index, rep.attempt(), rep.center_id()});
    }
  }
  resubmit_.clear();
  absl::Time now = clock_->Now();
  ResendStops(now);
  // What visits every job goes at most once a second, not every cycle, a slice at a time;
  // a walk still under way (a busy loop) is not begun again.
  if (now - gauges_updated_ >= absl::Seconds(1) && sweep_term_ != term_) {
    gauges_updated_ = now;
    SweepPass pass;
    pass.term = term_;
    pass.now = now;
    pass.from = moves_.cursor();
    pass.after = pass.from;
    pass.activity = activity_.load();
    moves_.BeginPass();
    sweep_term_ = term_;
    ContinueSweep(std::move(pass));
  }
}

void JobManager::ContinueSweep(SweepPass pass) {
  // A walk of an earlier term, or while standing down, is dropped: the next tick begins anew.
  if (!leading_ || pass.term != term_) {
    if (sweep_term_ == pass.term) sweep_term_.reset();
    return;
  }
  std::vector<v1::JobRecord*> slice;
  const size_t most = static_cast<size_t>(std::max(1, options_.walk_slice));
  auto it = pass.after.has_value() ? active_.upper_bound(*pass.after) : active_.begin();
  bool done = false;
  while (true) {
    if (it == active_.end() && !pass.wrapped) {
      pass.wrapped = true;
      pass.after.reset();
      it = active_.begin();
    }
    if (it == active_.end() || (pass.wrapped && it->first > pass.from)) {
      done = true;
      break;
    }
    if (slice.size() >= most) break;
    const std::string& id = it->first;
    Active& job = it->second;
    EnforceTimeLimit(job, pass.now);
    EnforceIdleLimit(id, job, pass);
    const std::string& status = job.record.status();
    if (status == kRunning) {
      ++pass.running;
    } else if (status != kCompleted && status != kFailed) {  // ended: being written
      ++pass.pending;
    }
    slice.push_back(&job.record);
    pass.after = id;
    ++it;
  }
  moves_.ConsiderSlice(slice, pass.now);
  if (!done) {
    loop_.Post([this, pass = std::move(pass)]() mutable { ContinueSweep(std::move(pass)); });
    return;
  }
  ready_since_.swap(pass.ready_now);
  {
    std::lock_guard<std::mutex> lock(probes_mu_);
    activity_probes_.swap(pass.probes);
  }
  UpdateGauges(pass.pending, pass.running);
  sweep_term_.reset();
}

// ---- Stops ----

namespace {

// An attempt's key as one string (the pending stops' index).
std::string StopKey(const apb::ReplicaKey& key) {
  return absl::StrCat(key.origin(), "/", key.job_id(), "/", key.task_index(), "/", key.replica_index(), "/",
                      key.attempt());
}

}  // namespace

void JobManager::StopAfterDrain(const std::string& center, const apb::ReplicaKey& key) {
  // Sent by ResendStops once due; a new term sends it at once (OnLead).
  auto [it, fresh] = pending_stops_.try_emplace(StopKey(key));
  if (!fresh) return;
  PendingStop& p = it->second;
  p.center = center;
  p.key = key;
  p.since = clock_->Now();
  p.next = p.since + options_.scale_down_drain;
}

void JobManager::SendStop(const std::string& center, const apb::ReplicaKey& key) {
  const std::string name = StopKey(key);
  auto [it, fresh] = pending_stops_.try_emplace(name);
  PendingStop& p = it->second;
  if (!fresh && p.next == absl::InfiniteFuture()) return;  // one in flight already
  if (fresh) {
    p.center = center;
    p.key = key;
    p.since = clock_->Now();
  }
  p.next = absl::InfiniteFuture();
  const uint64_t term = term_;
  dispatcher_.StopReplica(center, key, [this, center, key, term](absl::Status answer) {
    loop_.Post([this, center, key, term, answer = std::move(answer)] { OnStopAnswer(center, key, answer, term); });
  });
}

void JobManager::OnStopAnswer(const std::string& center, const apb::ReplicaKey& key, const absl::Status& answer,
                              uint64_t term) {
  if (term != term_ || !leading_) return;  // the next term sends its own
  auto it = pending_stops_.find(StopKey(key));
  if (it == pending_stops_.end()) return;
  if (answer.ok() || absl::IsNotFound(answer)) {
    pending_stops_.erase(it);  // stopped, or it never ran there
    return;
  }
  PendingStop& p = it->second;
  const absl::Time now = clock_->Now();
  if (now - p.since > absl::Hours(24)) {
    spdlog::error("job manager: gave up stopping {} at {} after a day of tries: {}", StopKey(key), center,
                  answer.ToString());
    pending_stops_.erase(it);
    return;
  }
  p.next = now + p.backoff;
  p.backoff = std::min(p.backoff * 2, absl::Minutes(1));
}

void JobManager::StopIfStopped(const v1::JobRecord& r, int index, const std::string& center,
                               const apb::Replica& report) {
  if (report.state() != apb::REPLICA_RUNNING && report.state() != apb::REPLICA_PENDING) return;
  for (const auto& a : r.replicas(index).attempts()) {
    if (a.attempt() == report.key().attempt() && a.center_id() == center && a.has_stopped_at()) {
      apb::ReplicaKey key = ReplicaKeyOf(r, index);
      key.set_attempt(a.attempt());
      SendStop(center, key);
    }
  }
}

void JobManager::ResendStops(absl::Time now) {
  std::vector<std::pair<std::string, apb::ReplicaKey>> due;
  for (const auto& [name, p] : pending_stops_) {
    if (p.next <= now) due.emplace_back(p.center, p.key);
  }
  for (const auto& [center, key] : due) SendStop(center, key);
}

// ---- Reads (any thread) ----

JobManager::Snapshot JobManager::Committed(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(view_mu_);
  auto it = view_.find(job_id);
  return it == view_.end() ? nullptr : it->second;
}

absl::StatusOr<v1::TrainJob> JobManager::Get(const std::string& job_id) {
  if (Snapshot r = Committed(job_id)) return ToTrainJob(*r, /*with_history=*/true);
  auto stored = jobs_.Get(job_id);
  if (!stored.ok()) return stored.status();
  return ToTrainJob(*stored, /*with_history=*/true);
}

absl::StatusOr<v1::ListTrainJobsResponse> JobManager::List(const v1::ListTrainJobsRequest& request,
                                                           const std::optional<std::vector<std::string>>& projects) {
  auto page = jobs_.List(request, projects);
  if (!page.ok()) return page.status();
  v1::ListTrainJobsResponse resp;
  for (const auto& stored : page->first) {
    // The view is newer than the page while writes are in flight.
    Snapshot r = Committed(stored.job_id());
    *resp.add_jobs() = ToTrainJob(r ? *r : stored);
  }
  resp.set_next_page_token(page->second);
  return resp;
}

absl::StatusOr<v1::JobRecord> JobManager::CommittedRecord(const std::string& job_id) {
  if (Snapshot r = Committed(job_id)) return *r;
  return jobs_.Get(job_id);
}

absl::StatusOr<std::string> JobManager::ReadLog(const std::string& job_id, int task_index, int replica_index) {
  if (auto url = LogUrl(job_id, task_index, replica_index); !url.ok()) return url.status();
  auto read = CommittedRecord(job_id);
  if (!read.ok()) return read.status();
  const v1::JobRecord& record = *read;
  int index = IndexOf(record, task_index, replica_index);
  const auto& rep = record.replicas(index);
  if (rep.center_id().empty() || rep.state() == v1::ReplicaRecord::DISPATCHING ||
      rep.state() == v1::ReplicaRecord::STAGING) {
    return absl::FailedPreconditionError(
        absl::StrCat("replica ", replica_index, " of task ", task_index, " has not started: no log yet"));
  }
  auto address = addresses_.Of(rep.center_id());
  if (!address.ok()) return address.status();
  return adapters_->ReadLog({rep.center_id(), *address}, ReplicaKeyOf(record, index), options_.max_log_bytes);
}

absl::StatusOr<std::vector<JobManager::EndpointRoute>> JobManager::RoutesToEndpoint(const std::string& job_id,
                                                                                    int task_index, int replica_index,
                                                                                    const std::string& port_name) {
  auto read = CommittedRecord(job_id);
  if (!read.ok()) return read.status();
  const v1::JobRecord& record = *read;
  if (task_index < 0 || task_index >= record.request().tasks_size()) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " has no task ", task_index));
  }
  const v1::TaskSpec& task = record.request().tasks(task_index);
  bool declared = false;
  std::vector<std::string> names;
  for (const auto& p : task.ports()) {
    declared |= p.name() == port_name;
    names.push_back(absl::StrCat("\"", p.name(), "\""));
  }
  if (port_name.empty()) {
    // A command in a replica (`jcctl job exec`): any running replica, ports or none.
    if (replica_index == kAllReplicas) {
      return absl::InvalidArgumentError("a command runs in one replica: name it (replica_index)");
    }
  } else if (!declared) {
    return absl::NotFoundError(absl::StrCat("task ", task_index, " of job ", job_id, " declares no port \"",
                                            absl::CHexEscape(port_name.substr(0, 32)), "\"",
                                            names.empty() ? "; it declares none" : "; it has " + absl::StrJoin(names, ", ")));
  }
  int index = replica_index == kAllReplicas ? -1 : IndexOf(record, task_index, replica_index);
  if (replica_index != kAllReplicas && (index < 0 || record.replicas(index).scaled_away())) {
    return absl::NotFoundError(absl::StrCat("task ", task_index, " of job ", job_id, " has no replica ", replica_index));
  }
  if (record.status() == kCompleted || record.status() == kFailed) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " has ended (", record.status(), ")"));
  }
  if (record.stop_requested()) return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is stopping"));
  auto route = [&](int i) -> absl::StatusOr<EndpointRoute> {
    const auto& rep = record.replicas(i);
    auto address = addresses_.Of(rep.center_id());
    if (!address.ok()) return address.status();
    return EndpointRoute{{rep.center_id(), *address}, ReplicaKeyOf(record, i), record.request().project(),
                         rep.replica_index(),
                         EndpointToken(record.endpoint_token(), record.job_id(), rep.task_index(), rep.replica_index(),
                                       rep.attempt(), port_name)};
  };
  std::vector<EndpointRoute> out;
  if (index >= 0) {
    const auto& rep = record.replicas(index);
    if (rep.state() != v1::ReplicaRecord::RUNNING || rep.center_id().empty()) {
      return absl::FailedPreconditionError(absl::StrCat("replica ", replica_index, " of task ", task_index,
                                                        " is not running (",
                                                        absl::AsciiStrToLower(v1::ReplicaRecord::State_Name(rep.state())),
                                                        ")"));
    }
    JC_ASSIGN_OR_RETURN(EndpointRoute r, route(index));
    out.push_back(std::move(r));
    return out;
  }
  // The task's endpoint: its replicas running now whose port answers (the rotation). A
  // replica scaled away leaves it at once, before its stop reaches its center.
  for (int i = 0; i < record.replicas_size(); ++i) {
    const auto& rep = record.replicas(i);
    if (rep.task_index() != task_index || rep.scaled_away() || rep.state() != v1::ReplicaRecord::RUNNING ||
        rep.center_id().empty()) {
      continue;
    }
    bool ready = false;
    for (const auto& e : rep.endpoints()) ready |= e.name() == port_name && e.ready();
    if (!ready) continue;
    auto r = route(i);
    if (r.ok()) out.push_back(std::move(*r));
  }
  if (out.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no replica of task ", task_index, " of job ", job_id, " has port \"", port_name, "\" ready now"));
  }
  return out;
}

v1::CreateTrainJobResponse JobManager::ResponseOf(const v1::JobRecord& r) const {
  v1::CreateTrainJobResponse resp;
  resp.set_job_id(r.job_id());
  AddTaskInfos(r, resp.mutable_task_infos());  // as the job's view shows them, nothing else built
  return resp;
}

int JobManager::IndexOf(const v1::JobRecord& r, int task, int replica) const {
  for (int i = 0; i < r.replicas_size(); ++i) {
    if (r.replicas(i).task_index() == task && r.replicas(i).replica_index() == replica) return i;
  }
  return -1;
}

void JobManager::SetBudgets(std::string month, std::map<std::string, v1::ProjectBudget> budgets,
                            std::map<std::string, double> ended) {
  if (metrics_) {
    for (prometheus::Gauge* g : budget_gauges_) metrics_->budget->Remove(g);
    budget_gauges_.clear();
    for (const auto& [project, b] : budgets) {
      prometheus::Gauge& g = metrics_->budget->Add({{"project", project}});
      g.Set(b.monthly());
      budget_gauges_.push_back(&g);
    }
    for (auto it = budget_ratio_gauges_.begin(); it != budget_ratio_gauges_.end();) {
      if (budgets.count(it->first) > 0) {
        ++it;
        continue;
      }
      metrics_->budget_used_ratio->Remove(it->second);
      it = budget_ratio_gauges_.erase(it);
    }
  }
  admission_.SetBudgets(std::move(month), std::move(budgets), std::move(ended));
}

double JobManager::CatalogView::HighestPrice(const std::string& spec_id) const {
  return scheduler_->HighestPrice(spec_id);
}

std::optional<double> JobManager::CatalogView::PriceAt(const std::string& center_id, const std::string& spec_id,
                                                       absl::Time at) const {
  auto offer = scheduler_->OfferAt(center_id, spec_id);
  if (!offer.has_value()) return std::nullopt;
  return offer->PriceAt(at);
}

std::optional<std::pair<double, double>> JobManager::CatalogView::Quantity(const std::string& spec_id) const {
  auto q = scheduler_->SpecQuantity(spec_id);
  if (!q.ok()) return std::nullopt;
  return std::make_pair(q->cpu, q->gpu);
}

void JobManager::RecountAdmission() {
  // Every job in memory, those whose create is not committed yet included (they hold their
  // reservation and wait like the others). One pass, O(replicas), no I/O.
  const absl::Time now = clock_->Now();
  admission_.BeginRecount(now);
  for (const auto& [id, job] : active_) admission_.Count(job.record);
  for (const auto& c : burst_.creates) admission_.Count(c.job.record);
  for (const auto& c : admission_.EndRecount()) {
    spdlog::warn("job manager: project {} has spent {:.6g} of its monthly budget of {:.6g} ({}%){}", c.project,
                 c.spent, c.budget, c.percent,
                 admission_.budgets().at(c.project).hard() && c.percent >= 100 ? ": new jobs are refused" : "");
    if (metrics_) {
      metrics_->budget_alerts->Add({{"project", c.project}, {"threshold", std::to_string(c.percent)}}).Increment();
    }
  }
  if (metrics_) {
    for (const auto& [project, b] : admission_.budgets()) {
      prometheus::Gauge*& gauge = budget_ratio_gauges_[project];
      if (gauge == nullptr) gauge = &metrics_->budget_used_ratio->Add({{"project", project}});
      gauge->Set(admission_.UsedRatio(project));
    }
  }
  // Jobs a hard budget stops: all of a project's that reached it and asked for stop_running;
  // any that ran past its reservation.
  if (admission_.budgets().empty()) return;
  for (auto& [id, job] : active_) {
    v1::JobRecord& r = job.record;
    std::string reason = admission_.StopReason(r);
    if (reason.empty()) continue;
    StopFor(job, std::move(reason), now);
  }
}

void JobManager::SetQuotas(std::map<std::string, v1::ProjectQuota> quotas) {
  if (metrics_) {
    for (prometheus::Gauge* g : quota_gauges_) metrics_->project_quota->Remove(g);
    quota_gauges_.clear();
    for (const auto& [project, q] : quotas) {
      for (const auto& [limit, value] : {std::pair<const char*, int64_t>{"max_running_gpus", q.max_running_gpus()},
                                         {"max_running_cpus", q.max_running_cpus()},
                                         {"max_queued_jobs", q.max_queued_jobs()},
                                         {"max_priority", q.max_priority()}}) {
        if (value <= 0) continue;
        prometheus::Gauge& g = metrics_->project_quota->Add({{"project", project}, {"limit", limit}});
        g.Set(static_cast<double>(value));
        quota_gauges_.push_back(&g);
      }
    }
  }
  // The waiting queue ranks no job above its project's grant (a record from before grants,
  // or from before one was lowered): when a grant changes, the jobs above 0 take their
  // places again.
  absl::flat_hash_map<std::string, int> grants;
  for (const auto& [project, q] : quotas) {
    if (q.max_priority() > 0) grants[project] = q.max_priority();
  }
  if (waiting_.SetPriorityGrants(std::move(grants))) {
    std::vector<std::string> raised;
    for (const auto& [p, since, seq, id] : waiting_.in_line()) {
      auto it = active_.find(id);
      if (it != active_.end() && it->second.record.request().scheduling().priority() > 0) raised.push_back(id);
    }
    for (const std::string& id : raised) {
      const v1::JobRecord& r = active_.at(id).record;
      waiting_.Put(r, Attained(r));
    }
  }
  admission_.SetQuotas(std::move(quotas));
}

void JobManager::EnableMetrics(prometheus::Registry& registry) {
  metrics_ = RegisterJobMetrics(registry);
  moves_.SetMetrics(metrics_.get());
  dispatcher_.SetTimings(metrics_->handover_outbox, metrics_->handover_adapter_call);
  UpdateGauges(0, 0);
}

std::optional<apb::SubmitReplicaRequest> JobManager::SubmitRequest(const Dispatch& d) {
  auto it = active_.find(d.job_id);
  if (it == active_.end()) return std::nullopt;
  const v1::JobRecord& r = it->second.record;
  const auto& rep = r.replicas(d.replica);
  if (rep.state() != v1::ReplicaRecord::DISPATCHING || rep.attempt() != d.attempt) return std::nullopt;
  const auto& task = r.request().tasks(rep.task_index());
  apb::SubmitReplicaRequest req;
  *req.mutable_key() = ReplicaKeyOf(r, d.replica);
  req.set_command(task.command());
  req.set_image_id(task.image_id());
  req.set_image(rep.image());
  req.set_resource_spec_id(task.resource_spec_id());
  // The center maps these to the local account the replica runs as (run_as).
  req.set_project(r.request().project());
  req.set_job_user(r.request().user_name());
  // The center enforces the job's time limit too (Slurm's --time, nexec's -W), rounded up
  // to a whole second: the control plane's own check stops it also where a center does not.
  if (auto limit = estimator::TimeLimitOf(r.request())) {
    req.set_time_limit_seconds(absl::ToInt64Seconds(absl::Ceil(*limit, absl::Seconds(1))));
  }
  for (const auto& dataset : task.datasets()) req.add_datasets(dataset);
  for (const auto& port : task.ports()) {  // the center gives each one (SPEC A17)
    auto* p = req.add_ports();
    p->set_name(port.name());
    p->set_port(port.port());
    p->set_readiness_path(port.readiness_path());
  }
  auto& env = *req.mutable_env();
  env["JC_JOB_ID"] = r.job_id();
  env["JC_TASK_INDEX"] = absl::StrCat(rep.task_index());
  env["JC_REPLICA_INDEX"] = absl::StrCat(rep.replica_index());
  env["JC_REPLICA_NUMBER"] = absl::StrCat(task.replica_number());
  env["JC_ATTEMPT"] = absl::StrCat(rep.attempt());
  // Each port's token for this attempt (endpoint_token.h); JC_ENDPOINT_TOKEN: the first's.
  for (int k = 0; k < task.ports_size(); ++k) {
    std::string token = EndpointToken(r.endpoint_token(), r.job_id(), rep.task_index(), rep.replica_index(),
                                      rep.attempt(), task.ports(k).name());
    if (token.empty()) break;
    if (k == 0) env["JC_ENDPOINT_TOKEN"] = token;
    env[EndpointTokenEnvName(task.ports(k).name())] = std::move(token);
  }
  return req;
}

bool JobManager::CompleteSubmit(const Dispatch& d, const absl::StatusOr<apb::Replica>& result,
                                absl::Time answered_at) {
  auto it = active_.find(d.job_id);
  // Still this attempt on this center? (The adapter's event stream may already have
  // moved it on to pending or running.)
  bool current = false;
  if (it != active_.end()) {
    const auto& rep = it->second.record.replicas(d.replica);
    current = rep.attempt() == d.attempt && rep.center_id() == d.center_id && !Ended(rep.state()) &&
              rep.state() != v1::ReplicaRecord::WAITING;
  }
  if (!current) return result.ok();
  Active& job = it->second;
  auto* rep = job.record.mutable_replicas(d.replica);
  absl::Time now = clock_->Now();
  JobEffects fx;
  if (result.ok()) {
    // Stamped when the answer came (never before the dispatch was recorded).
    ApplySubmitAccepted(job.record, d.replica, *result, std::min(now, answered_at), &fx);
  } else if (rep->state() != v1::ReplicaRecord::DISPATCHING) {
    // Events already show it at the center: the error was about the answer, not the submit.
  } else if (Transient(result.status())) {
    rep->set_message(absl::StrCat("resubmitting: ", result.status().message()));
    resubmit_.insert({d.job_id, d.replica});
    if (metrics_) metrics_->dispatch_transient->Increment();
  } else {
    if (metrics_) metrics_->dispatch_refused->Increment();
    spdlog::warn("job manager: center {} refused replica {}/{} of {}: {}", d.center_id, rep->task_index(),
                 rep->replica_index(), d.job_id, result.status().ToString());
    ApplyAttemptFailedToStart(job.record, d.replica, std::string(result.status().message()), now, &fx);
  }
  ApplyEffects(job, fx);
  *job.record.mutable_updated_at() = ToTimestamp(now);
  // A plain acknowledgement is not written: until the adapter's next event is, the
  // stored replica stays DISPATCHING, and a restart only submits it again, which the
  // adapter answers with the replica it has. Failures, retries and ends are written, and
  // so is an answer that closed the attempt (an adapter answering a repeated submit with
  // the replica that ran and failed): the replica is then waiting at its next attempt,
  // not ended, and its usage record must land with the closed attempt, or a reload finds
  // the attempt open and meters it again.
  bool ended = job.record.status() == kCompleted || job.record.status() == kFailed;
  bool acknowledged_only =
      result.ok() && fx.metered.empty() && rep->attempt() == d.attempt && !Ended(rep->state()) && !ended;
  if (!acknowledged_only) MarkDirty(d.job_id);
  return false;
}

v1::UsageRecord JobManager::UsageRecordOf(const v1::JobRecord& r, const MeteredAttempt& m, absl::Time now) const {
  const std::string& center = m.attempt.center_id();
  const std::string& spec = r.request().tasks(r.replicas(m.index).task_index()).resource_spec_id();
  return MeteredUsageRecord(r, m, now, {scheduler_->OfferAt(center, spec), scheduler_->StaticPowerOf(center)});
}

namespace {

// When an attempt started, for its time limit: by its center's clock, but never before the
// control plane sent it, so that a center cannot make it look older than it is.
absl::Time LimitStart(const v1::AttemptRecord& a) {
  absl::Time start = FromTimestamp(a.started_at());
  if (a.has_submitted_at()) return std::max(start, FromTimestamp(a.submitted_at()));
  return start;
}

}  // namespace

v1::JobRecord* JobManager::MoveView::Find(const std::string& job_id) {
  auto it = manager_->active_.find(job_id);
  return it == manager_->active_.end() ? nullptr : &it->second.record;
}

std::vector<scheduler::Scheduler::MoveAnswer> JobManager::MoveView::MoveTargets(
    const std::vector<scheduler::Scheduler::MoveQuestion>& questions, double margin) {
  return manager_->scheduler_->MoveTargets(questions, margin);
}

void JobManager::MoveView::Apply(const std::string& job_id, const JobEffects& fx) {
  auto it = manager_->active_.find(job_id);
  if (it == manager_->active_.end()) return;
  manager_->ApplyEffects(it->second, fx);
  if (fx.changed) manager_->MarkDirty(job_id);
}

void JobManager::MoveView::Send(const Withdrawal& w) { manager_->burst_.withdrawals.push_back(w); }

void JobManager::StopFor(Active& job, std::string reason, absl::Time now) {
  v1::JobRecord& r = job.record;
  spdlog::info("job manager: job {} {}", r.job_id(), reason);
  r.set_stop_reason(std::move(reason));
  JobEffects fx;
  ApplyStopRequested(r, now, &fx);
  ApplyEffects(job, fx);
  MarkDirty(r.job_id());
}

void JobManager::EnforceTimeLimit(Active& job, absl::Time now) {
  v1::JobRecord& r = job.record;
  if (!r.request().has_time_limit() || r.stop_requested()) return;
  auto limit = estimator::TimeLimitOf(r.request());
  if (!limit.has_value()) return;
  std::string reason;
  for (const auto& rep : r.replicas()) {
    for (const auto& a : rep.attempts()) {
      if (a.closed() || !a.has_started_at() || !a.outcome().empty()) continue;
      if (now - LimitStart(a) > *limit) {
        reason = absl::StrFormat("stopped: replica %d of task %s %s of %s", rep.replica_index(),
                                 r.request().tasks(rep.task_index()).name(), kTimeLimitStop,
                                 estimator::DescribeDuration(*limit));
      }
    }
    if (!reason.empty()) break;
  }
  if (reason.empty()) return;
  StopFor(job, std::move(reason), now);
}

void JobManager::EnforceIdleLimit(const std::string& id, Active& job, SweepPass& pass) {
  const absl::Time now = pass.now;
  v1::JobRecord& r = job.record;
  if (!r.request().has_idle_timeout() || r.stop_requested()) return;
  // Idle only while it runs: from its current attempt's start (the control plane's send
  // at the earliest), from when this instance began to lead, and from its last use.
  std::optional<absl::Time> running_since;
  for (const auto& rep : r.replicas()) {
    if (rep.state() != v1::ReplicaRecord::RUNNING) continue;
    for (const auto& a : rep.attempts()) {
      if (a.closed() || !a.has_started_at() || !a.outcome().empty()) continue;
      running_since = std::max(running_since.value_or(absl::InfinitePast()), LimitStart(a));
    }
  }
  if (!running_since.has_value()) return;
  for (int t = 0; t < r.request().tasks_size(); ++t) {
    for (const auto& port : r.request().tasks(t).ports()) {
      if (!port.activity_path().empty()) pass.probes.push_back({id, t, port.name(), port.activity_path()});
    }
  }
  absl::Time last = std::max(*running_since, leading_since_);
  const absl::Duration limit = absl::Seconds(r.request().idle_timeout().seconds()) +
                               absl::Nanoseconds(r.request().idle_timeout().nanos());
  // Nobody can use it before one of its endpoints answers (a notebook unpacking and
  // starting on a busy host): its idle time counts from when one was first seen ready,
  // and one that never becomes ready is given the timeout once more from its start.
  if (std::any_of(r.request().tasks().begin(), r.request().tasks().end(),
                  [](const auto& t) { return t.ports_size() > 0; })) {
    bool ready = false;
    for (const auto& rep : r.replicas()) {
      for (const auto& e : rep.endpoints()) ready |= rep.state() == v1::ReplicaRecord::RUNNING && e.ready();
    }
    if (!ready) {
      last = std::max(last, *running_since + limit);
    } else {
      auto seen = ready_since_.find(id);
      last = std::max(last, seen != ready_since_.end() ? seen->second : now);
      pass.ready_now[id] = seen != ready_since_.end() ? seen->second : now;
    }
  }
  if (pass.activity != nullptr) {
    if (std::optional<absl::Time> used = pass.activity->LastActivity(id)) last = std::max(last, *used);
  }
  if (now - last <= limit) return;
  StopFor(job,
          absl::StrCat(kIdleStop, " ", estimator::DescribeDuration(limit),
                       " (no request through its endpoints, nor use its replica reported, since ",
                       absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", last, absl::UTCTimeZone()), ")"),
          now);
}

void JobManager::ApplyEffects(Active& job, const JobEffects& fx) {
  const v1::JobRecord& r = job.record;
  absl::Time now = clock_->Now();
  // Reported before released: a replica that was accepted and ended in one answer leaves
  // no reservation behind. As of the acceptance's arrival: stamped when the loop got to it
  // (a burst's commit later), a usage report asked for in between already counts the
  // replica while its reservation stays too — the center looked full to the next placement.
  for (size_t i = 0; i < fx.reported.size(); ++i) {
    const AttemptRef& a = fx.reported[i];
    scheduler_->Reported(scheduler::Scheduler::ReservationKey(r.job_id(), a.task_index, a.replica_index, a.attempt),
                         std::min(now, fx.reported_at),
                         i < fx.center_accepted_at.size() ? fx.center_accepted_at[i] : absl::InfiniteFuture());
  }
  for (const AttemptRef& a : fx.release) {
    scheduler_->Forget(scheduler::Scheduler::ReservationKey(r.job_id(), a.task_index, a.replica_index, a.attempt));
  }
  for (const AttemptRef& a : fx.stop) {
    apb::ReplicaKey key;
    key.set_job_id(r.job_id());
    key.set_task_index(a.task_index);
    key.set_replica_index(a.replica_index);
    key.set_attempt(a.attempt);
    key.set_origin(r.origin());
    burst_.stops.emplace_back(a.center_id, std::move(key));
  }
  if (learning_.Learn(r, fx, &burst_.durations) > 0 && options_.queue.UsesExpected()) {
    reestimation_.Learned(r.request());
  }
  for (const MeteredAttempt& m : fx.metered) {
    if (!options_.metering) break;
    burst_.usage.push_back(UsageRecordOf(r, m, now));
    admission_.AddEnded(r.request().project(), burst_.usage.back().cost());
    // The attempt keeps what its records cost (a correction adds its difference): the job's
    // cost is read from the record, not summed from the accounting tables at each view.
    for (auto& a : *job.record.mutable_replicas(m.index)->mutable_attempts()) {
      if (a.attempt() == m.attempt.attempt()) a.set_cost(a.cost() + burst_.usage.back().cost());
    }
  }
  // A usage record is written with its job's save, always: the closed attempt and its
  // record land together, so no reload meters the attempt again.
  if (!fx.metered.empty()) MarkDirty(r.job_id());
  // The waiting queue in place: a replica waits again (moved, failed, resubmitted), an
  // attempt of a waiting job ended (its attained service grew), or the job ended.
  // (in the queue already or not: its place in line may have moved past a sweep under way)
  if (fx.wait && options_.queue.UsesExpected()) reestimation_.WaitsAgain(r.seq());
  if (fx.wait || (!fx.release.empty() && waiting_.Contains(r))) waiting_.Put(r, Attained(r));
  if (!fx.ended.empty()) {
    waiting_.Remove(r);
    if (metrics_) metrics_->ended->Add({{"status", fx.ended}}).Increment();
  }
  if (fx.handed_over && metrics_) {
    metrics_->scheduling_time->Observe(absl::ToDoubleSeconds(FromProto(r.scheduled_at()) - FromProto(r.received_at())));
    metrics_->scheduled->Increment();
  }
}

v1::TrainJob JobManager::ToTrainJob(const v1::JobRecord& r, bool with_history) const {
  JobViewOptions view;
  view.with_history = with_history;
  view.now = clock_->Now();
  view.metering = options_.metering;
  view.price_at = [this](const std::string& center, const std::string& spec, absl::Time at) -> std::optional<double> {
    auto offer = scheduler_->OfferAt(center, spec);
    if (!offer.has_value()) return std::nullopt;
    return offer->PriceAt(at);
  };
  if (r.status() == kPending) {
    std::lock_guard<std::mutex> lock(positions_mu_);
    if (auto it = queue_positions_.find(r.job_id()); it != queue_positions_.end()) view.queue_position = it->second;
  }
  return TrainJobOf(r, view);
}

absl::StatusOr<std::string> JobManager::LogUrl(const std::string& job_id, int task_index, int replica_index) {
  auto job = Get(job_id);
  if (!job.ok()) return job.status();
  if (task_index < 0 || task_index >= job->task_infos_size()) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " has no task ", task_index, " (it has ",
                                            job->task_infos_size(), ")"));
  }
  if (replica_index < 0 || replica_index >= job->task_infos(task_index).replica_number()) {
    return absl::NotFoundError(absl::StrCat("task ", task_index, " of job ", job_id, " has no replica ", replica_index,
                                            " (it has ", job->task_infos(task_index).replica_number(), ")"));
  }
  return absl::StrCat("/openapi/v1/trainjob/", job_id, "/task/", task_index, "/replica/", replica_index,
                      "/log/content");
}

void JobManager::UpdateGauges(int pending, int running) {
  if (!metrics_) return;
  metrics_->queue_length->Set(static_cast<double>(waiting_.size()));
  metrics_->jobs->Add({{"status", kPending}}).Set(pending);
  metrics_->jobs->Add({{"status", kRunning}}).Set(running);
}

}  // namespace jc::jobs
