#include "services/jobs/job_manager.h"

#include <unistd.h>

#include <cstdlib>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/timestamp.h"
#include "services/jobs/job_state.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {

namespace {

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

bool Transient(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kDeadlineExceeded ||
         s.code() == absl::StatusCode::kResourceExhausted || s.code() == absl::StatusCode::kAborted;
}

}  // namespace

struct JobManager::Metrics {
  prometheus::Histogram* scheduling_time;
  prometheus::Counter* scheduled;
  prometheus::Counter* dispatch_transient;
  prometheus::Counter* dispatch_refused;
  prometheus::Histogram* dispatch_batch;
  prometheus::Gauge* queue_length;
  prometheus::Family<prometheus::Gauge>* jobs;
  prometheus::Family<prometheus::Counter>* ended;
  prometheus::Counter* step_downs;
  prometheus::Counter* watch_resyncs;
  prometheus::Family<prometheus::Counter>* events_ignored;
};

absl::Status ValidateCreate(const v1::CreateTrainJobRequest& req) {
  if (req.name().empty()) return absl::InvalidArgumentError("name: a job needs a name");
  if (req.name().size() > kMaxJobNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: at most ", kMaxJobNameLength, " characters, got ", req.name().size()));
  }
  if (req.tasks().empty()) return absl::InvalidArgumentError("tasks: a job needs at least one task");
  for (int t = 0; t < req.tasks_size(); ++t) {
    const auto& task = req.tasks(t);
    std::string where = absl::StrCat("tasks[", t, "]");
    if (task.name().size() > kMaxTaskNameLength) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".name: at most ", kMaxTaskNameLength, " characters, got ", task.name().size()));
    }
    if (task.command().find_first_not_of(" \t\n") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".command: a task needs a command"));
    }
    if (task.resource_spec_id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".resourceSpecId: a task needs a resource spec"));
    }
    if (task.replica_number() < 1 || task.replica_number() > scheduler::kMaxReplicasPerTask) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".replicaNumber: must be 1 to ",
                                                     scheduler::kMaxReplicasPerTask, ", got ", task.replica_number()));
    }
  }
  if (req.retry_policy().max_retries() < 0 || req.retry_policy().max_retries() > kMaxRetries) {
    return absl::InvalidArgumentError(
        absl::StrCat("retryPolicy.maxRetries: must be 0 to ", kMaxRetries, ", got ", req.retry_policy().max_retries()));
  }
  if (!v1::StatusPolicy_IsValid(req.status_policy())) {
    return absl::InvalidArgumentError("statusPolicy: unknown policy");
  }
  return absl::OkStatus();
}

JobManager::JobManager(store::Store* store, scheduler::Scheduler* scheduler, registry::CenterDirectory* centers,
                       southbound::AdapterClient* adapters, DataMover* mover, const Clock* clock, JobManagerOptions options)
    : store_(store),
      jobs_(store),
      scheduler_(scheduler),
      centers_(centers),
      adapters_(adapters),
      mover_(mover),
      clock_(clock),
      options_(options),
      dispatch_pool_(std::max(1, options.dispatch_threads)) {}

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
  lease_ = std::make_unique<store::Lease>(store_, "jobs", instance, options_.lease_ttl);
  jobs_.FenceWith(lease_.get());
  absl::StatusOr<std::string> origin = jobs_.Identity();
  if (!origin.ok()) return origin.status();
  origin_ = *origin;
  absl::StatusOr<bool> held = lease_->TryAcquire(absl::Now());
  if (!held.ok()) return held.status();
  if (*held) {
    if (absl::Status s = Lead(); !s.ok()) return s;
  } else {
    auto current = lease_->Current();
    std::string why = absl::StrCat("standing by: ", current.ok() ? current->first : "another instance",
                                   " holds the jobs lease (until ",
                                   current.ok() ? absl::FormatTime(current->second) : "unknown",
                                   "); this instance takes over when it ends");
    spdlog::warn("job manager: {}", why);
    std::lock_guard<std::mutex> lock(mu_);
    not_leading_ = why;
  }
  // The cycle runs whether this instance leads or not: standing by, it tries to lead.
  cycle_.Start(options_.cycle_interval, [this] { RunCycle(); });
  poller_.Start(options_.poll_interval, [this] { Reconcile(false); });
  return absl::OkStatus();
}

void JobManager::TryLead() {
  absl::Time now = absl::Now();
  if (now < next_lead_try_) return;
  // A released lease is taken within half a second; an expired one, once it expires.
  next_lead_try_ = now + std::min(lease_->ttl() / 4, absl::Milliseconds(500));
  absl::StatusOr<bool> won = lease_->TryAcquire(now);
  std::string why;
  if (!won.ok()) {
    why = absl::StrCat("not leading: the store does not answer (", won.status().message(), "); retrying");
  } else if (!*won) {
    auto current = lease_->Current();
    why = absl::StrCat("standing by: ", current.ok() && !current->first.empty() ? current->first : "another instance",
                       " holds the jobs lease; this instance takes over when it ends");
  } else {
    spdlog::warn("job manager: the jobs lease is ours ({}); leading", lease_->holder());
    absl::Status led = Lead();
    if (led.ok()) return;
    // The lease stays ours; the next cycle tries again.
    why = absl::StrCat("not leading: reloading the jobs failed (", led.message(), "); retrying");
    spdlog::error("job manager: {}", why);
  }
  std::lock_guard<std::mutex> lock(mu_);
  not_leading_ = why;
}

bool JobManager::RenewLease() {
  absl::Time now = absl::Now();
  if (now - lease_renewed_ < lease_->ttl() / 4) return true;
  absl::StatusOr<bool> held = lease_->TryAcquire(now);
  if (held.ok() && *held) {
    lease_renewed_ = now;
    return true;
  }
  if ((held.ok() && !*held) || now - lease_renewed_ >= lease_->ttl()) {
    // Another instance leads now (or may: the lease could not be renewed in time). Two
    // leaders would place the same jobs differently, so this one stops acting at once;
    // its writes are fenced by the lease meanwhile.
    StepDown(absl::StrCat("lost the jobs lease (",
                          held.ok() ? "another instance took it" : std::string(held.status().message()), ")"));
    return false;
  }
  return true;  // not renewed this time, but still within the TTL: try again next cycle
}

void JobManager::StepDown(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!leading_) return;
    leading_ = false;
    ++term_;
    // Reservations of this term's replicas go with them: the next term reloads them.
    for (const auto& [id, job] : active_) {
      for (const auto& rep : job.record.replicas()) {
        if (!rep.center_id().empty()) {
          scheduler_->Forget(scheduler::Scheduler::ReservationKey(id, rep.task_index(), rep.replica_index(),
                                                                  rep.attempt()));
        }
      }
    }
    // The jobs stay for reads (the last this instance knew, answered while the store is
    // away); nothing changes them until Lead() replaces them with the store's.
    queue_.clear();
    outboxes_.Clear();
    resubmit_.clear();
    stops_.clear();
    not_leading_ = absl::StrCat("stepped down: ", why, "; trying to lead again");
  }
  if (metrics_) metrics_->step_downs->Increment();
  spdlog::error("job manager: stepping down: {}. Nothing more is dispatched or written until this instance leads "
                "again, reloading every job from the store",
                why);
}

absl::Status JobManager::Lead() {
  lease_renewed_ = absl::Now();
  {
    // Not leading now, so no create starts; those under way commit (or fail) first.
    std::unique_lock<std::mutex> lock(mu_);
    if (!creates_done_.wait_for(lock, std::chrono::seconds(30), [this] { return creates_in_flight_ == 0; })) {
      return absl::UnavailableError("creates of an earlier term are still committing after 30 s");
    }
  }
  auto active = jobs_.LoadActive();
  if (!active.ok()) return active.status();
  auto seq = jobs_.MaxSeq();
  if (!seq.ok()) return seq.status();
  auto cursors = jobs_.Cursors();
  if (!cursors.ok()) return cursors.status();
  std::vector<Dispatch> resend;
  std::set<std::string> centers;
  uint64_t term = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (creates_in_flight_ > 0) return absl::UnavailableError("creates of an earlier term are still committing");
    active_.clear();
    queue_.clear();
    resubmit_.clear();
    stops_.clear();
    next_seq_ = *seq + 1;
    cursors_ = *cursors;
    for (auto& [record, version] : *active) {
      std::string id = record.job_id();
      Active& job = active_[id];
      job.record = std::move(record);
      job.version = version;  // the next write must be newer than the last that landed
      bool waiting = false;
      for (int i = 0; i < job.record.replicas_size(); ++i) {
        const auto& r = job.record.replicas(i);
        if (r.state() == v1::ReplicaRecord::WAITING) waiting = true;
        // Not acknowledged before the restart: submit again under the same key.
        if (r.state() == v1::ReplicaRecord::DISPATCHING) resend.push_back({id, i, r.attempt(), r.center_id()});
        if (r.state() == v1::ReplicaRecord::STAGING) resend.push_back({id, i, r.attempt(), r.center_id(), true});
        if (!r.center_id().empty() && !Ended(r.state())) centers.insert(r.center_id());
      }
      if (waiting) queue_.insert({-job.record.request().scheduling().priority(), job.record.seq(), id});
    }
    term = ++term_;
    leading_ = true;  // creates are taken from here on: job ids continue after the reloaded ones
    not_leading_.clear();
    spdlog::info("job manager: leading (term {}); {} jobs not ended reloaded ({} replicas to submit again)", term,
                 active_.size(), resend.size());
  }
  for (const auto& c : centers) EnsureWatcher(c);
  SendDispatches(std::move(resend), term);
  // Replicas the store shows at a center may have moved on (or be unknown there) while
  // nobody listened: each is asked once, whatever its event stream says.
  dispatch_pool_.Run([this] { Reconcile(true); });
  return absl::OkStatus();
}

void JobManager::Stop() {
  stopping_ = true;
  cycle_.Stop();
  poller_.Stop();
  std::vector<std::thread> watchers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    watchers.swap(watchers_);
  }
  for (auto& w : watchers) w.join();
  // A standby takes over at once rather than after the lease's time to live.
  if (leading_.exchange(false) && lease_ != nullptr) {
    if (absl::Status s = lease_->Release(); !s.ok()) spdlog::warn("job manager: releasing the lease: {}", s.ToString());
  }
}

absl::Status JobManager::Ready() {
  if (leading_) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  return absl::UnavailableError(not_leading_.empty() ? "the job manager is not leading" : not_leading_);
}

std::vector<std::pair<std::string, apb::ReplicaKey>> JobManager::TakeStopsLocked() {
  std::vector<std::pair<std::string, apb::ReplicaKey>> out;
  out.swap(stops_);
  return out;
}

void JobManager::SendStops(const std::vector<std::pair<std::string, apb::ReplicaKey>>& stops) {
  for (const auto& [center, key] : stops) {
    dispatch_pool_.Run([this, center = center, key = key] {
      auto address = AdapterAddress(center);
      if (!address.ok()) return;
      // A stop that does not arrive leaves the replica to end by itself; the job's
      // outcome is already decided and written, so nothing waits on it.
      if (absl::Status s = adapters_->Stop(*address, key); !s.ok()) {
        spdlog::info("job manager: stopping {} at {}: {}", key.job_id(), center, s.ToString());
      }
    });
  }
}

absl::Status JobManager::StandbyError() const {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    why = not_leading_;
  }
  return absl::UnavailableError(absl::StrCat(
      "this jobs instance does not lead, so it takes no creates or stops now: ",
      why.empty() ? "it is starting" : why, ". Retry (the leading instance, or this one once it leads, answers)"));
}

apb::ReplicaKey JobManager::KeyOf(const v1::JobRecord& r, int index) const {
  apb::ReplicaKey key;
  key.set_job_id(r.job_id());
  key.set_task_index(r.replicas(index).task_index());
  key.set_replica_index(r.replicas(index).replica_index());
  key.set_attempt(r.replicas(index).attempt());
  key.set_origin(r.origin());
  return key;
}

int JobManager::IndexOf(const v1::JobRecord& r, int task, int replica) const {
  for (int i = 0; i < r.replicas_size(); ++i) {
    if (r.replicas(i).task_index() == task && r.replicas(i).replica_index() == replica) return i;
  }
  return -1;
}

absl::StatusOr<v1::CreateTrainJobResponse> JobManager::Create(v1::CreateTrainJobRequest req) {
  if (!leading_) return StandbyError();
  if (absl::Status s = ValidateCreate(req); !s.ok()) return s;
  if (absl::Status s = scheduler_->Validate(req); !s.ok()) return s;
  std::string key = req.idempotency_key();
  auto response_of = [this](const v1::JobRecord& r) {
    v1::CreateTrainJobResponse resp;
    resp.set_job_id(r.job_id());
    *resp.mutable_task_infos() = ToTrainJob(r).task_infos();
    return resp;
  };
  if (!key.empty()) {
    auto existing = jobs_.FindByKey(key);
    if (!existing.ok()) return existing.status();
    if (existing->has_value()) return response_of(**existing);
  }

  v1::JobRecord record;
  uint64_t term = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!leading_) return StandbyError();
    term = term_;
    record.set_seq(next_seq_++);
    ++creates_in_flight_;
  }
  // Lead() waits for the creates of earlier terms to commit (or fail) before it reloads,
  // so that every acknowledged job is either in its reload or in this term's memory.
  struct InFlight {
    JobManager* m;
    bool counted = true;  // cleared where the count is taken back under a lock held anyway
    ~InFlight() {
      if (!counted) return;
      std::lock_guard<std::mutex> lock(m->mu_);
      if (--m->creates_in_flight_ == 0) m->creates_done_.notify_all();
    }
  } in_flight{this};
  record.set_job_id(absl::StrFormat("job-%08d", record.seq()));
  record.set_origin(origin_);
  absl::Time now = clock_->Now();
  *record.mutable_received_at() = ToTimestamp(now);
  *record.mutable_updated_at() = ToTimestamp(now);
  record.set_status(kPending);
  for (int t = 0; t < req.tasks_size(); ++t) {
    for (int r = 0; r < req.tasks(t).replica_number(); ++r) {
      auto* rep = record.add_replicas();
      rep->set_task_index(t);
      rep->set_replica_index(r);
    }
  }
  *record.mutable_request() = std::move(req);

  // Placed before the commit when no earlier job waits, so that the job and its placement
  // are one write; dispatched only once that write is durable.
  Active job;
  job.record = std::move(record);
  job.version = 1;
  std::vector<Dispatch> dispatches;
  auto entry = std::make_tuple(-job.record.request().scheduling().priority(), job.record.seq(), job.record.job_id());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (term_ == term && (queue_.empty() || *queue_.begin() > entry)) dispatches = ScheduleLocked(job);
  }
  absl::Status inserted = jobs_.Insert(job.record, key, job.version);
  if (!inserted.ok()) {
    for (const auto& d : dispatches) {
      const auto& rep = job.record.replicas(d.replica);
      scheduler_->Forget(scheduler::Scheduler::ReservationKey(d.job_id, rep.task_index(), rep.replica_index(),
                                                              rep.attempt()));
    }
    if (inserted.code() == absl::StatusCode::kAlreadyExists && !key.empty()) {
      // The same key raced us in: answer with the job it created.
      auto existing = jobs_.FindByKey(key);
      if (existing.ok() && existing->has_value()) return response_of(**existing);
    }
    return inserted;
  }
  // Committed: the job is acknowledged.
  v1::CreateTrainJobResponse response = response_of(job.record);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--creates_in_flight_ == 0) creates_done_.notify_all();
    in_flight.counted = false;
    if (term_ != term) {
      // This instance stepped down (and perhaps led again) meanwhile: the job is in the
      // store, and whichever term leads now reloads it from there.
      for (const auto& d : dispatches) {
        const auto& rep = job.record.replicas(d.replica);
        scheduler_->Forget(scheduler::Scheduler::ReservationKey(d.job_id, rep.task_index(), rep.replica_index(),
                                                                rep.attempt()));
      }
      return response;
    }
    bool waits = std::any_of(job.record.replicas().begin(), job.record.replicas().end(),
                             [](const auto& r) { return r.state() == v1::ReplicaRecord::WAITING; });
    if (waits) queue_.insert(entry);
    active_[job.record.job_id()] = std::move(job);
  }
  SendDispatches(std::move(dispatches), term);
  return response;
}

std::vector<JobManager::Dispatch> JobManager::ScheduleLocked(Active& job) {
  v1::JobRecord& r = job.record;
  std::vector<scheduler::Scheduler::Slot> slots;
  std::vector<int> indices;
  std::vector<std::string> siblings;
  for (int i = 0; i < r.replicas_size(); ++i) {
    const auto& rep = r.replicas(i);
    if (rep.state() == v1::ReplicaRecord::WAITING) {
      slots.push_back({rep.task_index(), rep.replica_index(), rep.attempt(),
                       {rep.failed_centers().begin(), rep.failed_centers().end()}});
      indices.push_back(i);
    } else if (!rep.center_id().empty() && !Ended(rep.state())) {
      siblings.push_back(rep.center_id());
    }
  }
  auto entry = std::make_tuple(-r.request().scheduling().priority(), r.seq(), r.job_id());
  if (slots.empty() || r.stop_requested()) {
    queue_.erase(entry);
    return {};
  }
  auto decision = scheduler_->Place(r.job_id(), r.request(), slots, siblings);
  if (!decision.ok()) {
    r.set_waiting_reason(std::string(decision.status().message()));
    if (decision.status().code() == absl::StatusCode::kInvalidArgument) {
      // The catalog changed under the job (its spec or image is gone): it can never run.
      JobEffects fx;
      ApplyUnplaceable(r, r.waiting_reason(), clock_->Now(), &fx);
      ApplyEffectsLocked(job, fx);
    }
    return {};
  }
  std::vector<Dispatch> out;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (decision->centers[k].empty()) continue;
    auto* rep = r.mutable_replicas(indices[k]);
    bool stage = mover_ != nullptr && !r.request().tasks(rep->task_index()).datasets().empty();
    rep->set_state(stage ? v1::ReplicaRecord::STAGING : v1::ReplicaRecord::DISPATCHING);
    rep->set_center_id(decision->centers[k]);
    if (stage) rep->set_message(absl::StrCat("staging datasets to ", rep->center_id()));
    out.push_back({r.job_id(), indices[k], rep->attempt(), rep->center_id(), stage});
  }
  if (decision->placed) {
    queue_.erase(entry);
    r.clear_waiting_reason();
  } else {
    r.set_waiting_reason(decision->reason);
  }
  *r.mutable_updated_at() = ToTimestamp(clock_->Now());
  return out;
}

void JobManager::RunCycle() {
  if (!leading_) {
    TryLead();
    return;
  }
  if (!RenewLease()) return;
  std::vector<Dispatch> dispatches;
  std::vector<std::pair<v1::JobRecord, int64_t>> writes;
  std::vector<std::pair<std::string, apb::ReplicaKey>> stops;
  uint64_t term = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!leading_) return;
    term = term_;
    // FCFS by (priority, submission); a job that does not fit does not hold back the
    // ones behind it that do (backfill).
    std::vector<std::string> order;
    for (const auto& [p, s, id] : queue_) order.push_back(id);
    for (const auto& id : order) {
      auto it = active_.find(id);
      if (it == active_.end()) continue;
      std::string before = it->second.record.waiting_reason();
      auto more = ScheduleLocked(it->second);
      bool changed = !more.empty() || before != it->second.record.waiting_reason();
      dispatches.insert(dispatches.end(), more.begin(), more.end());
      if (changed) writes.emplace_back(it->second.record, ++it->second.version);
    }
    // Submits that failed for a passing reason go again.
    for (const auto& [id, index] : resubmit_) {
      auto it = active_.find(id);
      if (it == active_.end()) continue;
      const auto& rep = it->second.record.replicas(index);
      if (rep.state() == v1::ReplicaRecord::DISPATCHING) dispatches.push_back({id, index, rep.attempt(), rep.center_id()});
    }
    resubmit_.clear();
    // The gauges visit every job: at most once a second, not every cycle.
    absl::Time now = clock_->Now();
    if (now - gauges_updated_ >= absl::Seconds(1)) {
      gauges_updated_ = now;
      UpdateGauges();
    }
    stops = TakeStopsLocked();
  }
  // The cycle's decisions are one transaction; dispatch follows once it is durable.
  if (absl::Status s = jobs_.SaveMany(writes); !s.ok()) {
    StepDown(absl::StrCat("writing a scheduling cycle's decisions failed: ", s.message()));
    return;
  }
  ForgetEnded(writes);
  SendStops(stops);
  SendDispatches(std::move(dispatches), term);
}

void JobManager::SendDispatches(std::vector<Dispatch> dispatches, uint64_t term) {
  if (dispatches.empty()) return;
  std::vector<std::string> senders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (term_ != term) return;  // decided in a term that ended: the next one reloads them
    // Each center's sender takes what queued while it was busy as one SubmitReplicas call
    // (common/outbox.h). Added under mu_, so that a step-down's Clear() cannot interleave.
    std::vector<std::pair<std::string, Dispatch>> queued;
    for (auto& d : dispatches) {
      if (!d.stage) queued.emplace_back(d.center_id, d);
    }
    senders = outboxes_.AddAll(std::move(queued));
  }
  for (auto& d : dispatches) {
    EnsureWatcher(d.center_id);
    if (d.stage) dispatch_pool_.Run([this, d, term] { Stage(d, term); });
  }
  for (const auto& center : senders) dispatch_pool_.Run([this, center] { SendBatches(center); });
}

void JobManager::ForgetEnded(const std::vector<std::pair<v1::JobRecord, int64_t>>& written) {
  bool any = std::any_of(written.begin(), written.end(), [](const auto& w) {
    return w.first.status() == kCompleted || w.first.status() == kFailed;
  });
  if (!any) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [record, version] : written) {
    if (record.status() != kCompleted && record.status() != kFailed) continue;
    auto it = active_.find(record.job_id());
    // A later write of the job is on its way: it forgets the job once it lands.
    if (it != active_.end() && it->second.version == version) active_.erase(it);
  }
}

absl::StatusOr<std::string> JobManager::AdapterAddress(const std::string& center_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Kept for a few seconds: a center whose adapter moved (re-registered elsewhere) is
    // followed there without a restart.
    auto it = addresses_.find(center_id);
    if (it != addresses_.end() && clock_->Now() - it->second.second < kAddressTtl) return it->second.first;
  }
  auto center = centers_->GetCenter(center_id);
  if (!center.ok()) return center.status();
  if (center->adapter_address().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("center ", center_id, " has no adapter_address"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  addresses_[center_id] = {center->adapter_address(), clock_->Now()};
  return center->adapter_address();
}

std::optional<apb::SubmitReplicaRequest> JobManager::SubmitRequestLocked(const Dispatch& d) {
  auto it = active_.find(d.job_id);
  if (it == active_.end()) return std::nullopt;
  const v1::JobRecord& r = it->second.record;
  const auto& rep = r.replicas(d.replica);
  if (rep.state() != v1::ReplicaRecord::DISPATCHING || rep.attempt() != d.attempt) return std::nullopt;
  const auto& task = r.request().tasks(rep.task_index());
  apb::SubmitReplicaRequest req;
  *req.mutable_key() = KeyOf(r, d.replica);
  req.set_command(task.command());
  req.set_image_id(task.image_id());
  req.set_resource_spec_id(task.resource_spec_id());
  auto& env = *req.mutable_env();
  env["JC_JOB_ID"] = r.job_id();
  env["JC_TASK_INDEX"] = absl::StrCat(rep.task_index());
  env["JC_REPLICA_INDEX"] = absl::StrCat(rep.replica_index());
  env["JC_REPLICA_NUMBER"] = absl::StrCat(task.replica_number());
  env["JC_ATTEMPT"] = absl::StrCat(rep.attempt());
  return req;
}

void JobManager::SendBatches(const std::string& center_id) {
  while (true) {
    std::vector<Dispatch> taken = outboxes_.Take(center_id);
    if (taken.empty()) return;  // this sender is done
    std::vector<Dispatch> batch;
    std::vector<apb::SubmitReplicaRequest> reqs;
    uint64_t term = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      term = term_;
      for (Dispatch& d : taken) {
        if (auto req = SubmitRequestLocked(d)) {  // still current?
          batch.push_back(std::move(d));
          reqs.push_back(std::move(*req));
        }
      }
    }
    if (batch.empty()) continue;
    if (metrics_) metrics_->dispatch_batch->Observe(static_cast<double>(reqs.size()));
    auto address = AdapterAddress(center_id);
    std::vector<absl::StatusOr<apb::Replica>> results =
        address.ok() ? adapters_->SubmitMany(*address, reqs)
                     : std::vector<absl::StatusOr<apb::Replica>>(reqs.size(), address.status());
    std::vector<std::pair<v1::JobRecord, int64_t>> writes;
    std::vector<std::pair<std::string, apb::ReplicaKey>> stops;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Answers to a term that ended are not applied: the next term asks again by key.
      if (term_ != term) continue;
      for (size_t i = 0; i < batch.size(); ++i) {
        // The job ended or moved on while the submit was under way: do not leave it running.
        if (CompleteSubmitLocked(batch[i], results[i], &writes)) stops_.emplace_back(center_id, reqs[i].key());
      }
      stops = TakeStopsLocked();
    }
    if (absl::Status s = jobs_.SaveMany(writes); !s.ok()) {
      StepDown(absl::StrCat("writing the answers of ", center_id, " to submits failed: ", s.message()));
      continue;  // the outbox was emptied; this sender ends on its next turn
    }
    ForgetEnded(writes);
    SendStops(stops);
  }
}

bool JobManager::CompleteSubmitLocked(const Dispatch& d, const absl::StatusOr<apb::Replica>& result,
                                      std::vector<std::pair<v1::JobRecord, int64_t>>* writes) {
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
    ApplySubmitAccepted(job.record, d.replica, *result, now, &fx);
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
  ApplyEffectsLocked(job, fx);
  *job.record.mutable_updated_at() = ToTimestamp(now);
  // A plain acknowledgement is not written: until the adapter's next event is, the
  // stored replica stays DISPATCHING, and a restart only submits it again, which the
  // adapter answers with the replica it has. Failures, retries and ends are written.
  bool ended = job.record.status() == kCompleted || job.record.status() == kFailed;
  bool acknowledged_only = result.ok() && !Ended(rep->state()) && !ended;
  if (!acknowledged_only) writes->emplace_back(job.record, ++job.version);
  return false;
}

void JobManager::ApplyEffectsLocked(Active& job, const JobEffects& fx) {
  const v1::JobRecord& r = job.record;
  absl::Time now = clock_->Now();
  // Reported before released: a replica that was accepted and ended in one answer leaves
  // no reservation behind.
  for (const AttemptRef& a : fx.reported) {
    scheduler_->Reported(scheduler::Scheduler::ReservationKey(r.job_id(), a.task_index, a.replica_index, a.attempt),
                         now);
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
    stops_.emplace_back(a.center_id, std::move(key));
  }
  auto entry = std::make_tuple(-r.request().scheduling().priority(), r.seq(), r.job_id());
  if (fx.wait) queue_.insert(entry);
  if (!fx.ended.empty()) {
    queue_.erase(entry);
    if (metrics_) metrics_->ended->Add({{"status", fx.ended}}).Increment();
  }
  if (fx.handed_over && metrics_) {
    metrics_->scheduling_time->Observe(absl::ToDoubleSeconds(FromProto(r.scheduled_at()) - FromProto(r.received_at())));
    metrics_->scheduled->Increment();
  }
}

void JobManager::Stage(const Dispatch& d, uint64_t term) {
  std::vector<std::string> datasets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (term_ != term) return;
    auto it = active_.find(d.job_id);
    if (it == active_.end()) return;
    const auto& rep = it->second.record.replicas(d.replica);
    if (rep.state() != v1::ReplicaRecord::STAGING || rep.attempt() != d.attempt) return;
    const auto& task = it->second.record.request().tasks(rep.task_index());
    datasets.assign(task.datasets().begin(), task.datasets().end());
  }
  absl::Status staged = absl::OkStatus();
  auto address = AdapterAddress(d.center_id);
  if (!address.ok()) staged = address.status();
  {
    std::lock_guard<std::mutex> staging(staging_mu_);
    for (const auto& key : datasets) {
      if (!staged.ok()) break;
      size_t colon = key.rfind(':');
      std::string name = key.substr(0, colon), version = colon == std::string::npos ? "" : key.substr(colon + 1);
      auto sources = mover_->Sources(name, version, d.center_id);
      if (!sources.ok()) {
        staged = absl::Status(sources.status().code(), absl::StrCat("staging ", key, ": ", sources.status().message()));
        break;
      }
      if (sources->empty()) continue;  // already there
      apb::StageDatasetRequest req;
      req.set_data_name(name);
      req.set_data_version(version);
      for (const auto& url : *sources) req.add_source_urls(url);
      auto copy = adapters_->Stage(*address, req);
      if (!copy.ok()) {
        staged = absl::Status(copy.status().code(), absl::StrCat("staging ", key, ": ", copy.status().message()));
        break;
      }
      // Not recorded, the copy is still there; the next job that needs the dataset here
      // copies it again (the adapter answers at once with what it has).
      absl::Status recorded = mover_->AddLocation(name, version, d.center_id, copy->url());
      if (!recorded.ok()) {
        staged = absl::Status(recorded.code(),
                              absl::StrCat("staging ", key, ": the copy at ", d.center_id,
                                           " could not be recorded: ", recorded.message()));
        break;
      }
    }
  }
  v1::JobRecord write;
  int64_t version = 0;
  bool submit = false;
  std::vector<std::pair<std::string, apb::ReplicaKey>> stops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (term_ != term) return;
    auto it = active_.find(d.job_id);
    if (it == active_.end()) return;
    Active& job = it->second;
    auto* rep = job.record.mutable_replicas(d.replica);
    if (rep->state() != v1::ReplicaRecord::STAGING || rep->attempt() != d.attempt) return;
    if (staged.ok()) {
      rep->set_state(v1::ReplicaRecord::DISPATCHING);
      rep->clear_message();
      submit = true;
    } else {
      JobEffects fx;
      ApplyAttemptFailedToStart(job.record, d.replica, std::string(staged.message()), clock_->Now(), &fx);
      ApplyEffectsLocked(job, fx);
    }
    *job.record.mutable_updated_at() = ToTimestamp(clock_->Now());
    write = job.record;
    version = ++job.version;
    stops = TakeStopsLocked();
  }
  if (absl::Status s = jobs_.Save(write, version); !s.ok()) {
    StepDown(absl::StrCat("writing the outcome of staging for ", d.job_id, " failed: ", s.message()));
    return;
  }
  ForgetEnded({{write, version}});
  SendStops(stops);
  if (submit) {
    Dispatch next = d;
    next.stage = false;
    SendDispatches({next}, term);
  }
}

bool JobManager::ApplyReportLocked(Active& job, int index, const apb::Replica& replica) {
  JobEffects fx;
  ApplyReport(job.record, index, replica, clock_->Now(), &fx);
  ApplyEffectsLocked(job, fx);
  return fx.changed;
}

void JobManager::EnsureWatcher(const std::string& center_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || !watched_.insert(center_id).second) return;
  watchers_.emplace_back([this, center_id] { WatchLoop(center_id); });
}

void JobManager::WatchLoop(const std::string& center_id) {
  while (!stopping_) {
    auto address = leading_ ? AdapterAddress(center_id) : absl::UnavailableError("not leading");
    if (address.ok()) {
      uint64_t cursor = 0;
      uint64_t term = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        cursor = cursors_[center_id];
        term = term_;
      }
      absl::Time last_cursor_save = absl::InfinitePast();
      absl::Status s = adapters_->Watch(
          *address, cursor,
          [&](const apb::ReplicaEvent& e) {
            v1::JobRecord write;
            int64_t version = 0;
            std::vector<std::pair<std::string, apb::ReplicaKey>> stops;
            {
              std::lock_guard<std::mutex> lock(mu_);
              if (term_ != term) return;  // the stream ends below; the next term resumes from its cursor
              watch_connected_.insert(center_id);
              cursors_[center_id] = std::max(cursors_[center_id], e.cursor());
              auto it = active_.find(e.replica().key().job_id());
              // Keys of another control plane (or of this one before its store was
              // re-initialised) are not ours, whatever their job id says.
              bool ours = it != active_.end() && e.replica().key().origin() == it->second.record.origin();
              if (!ours && it != active_.end()) {
                spdlog::warn("job manager: center {} reported replica {} of another origin ({}, not {}); ignored",
                             center_id, e.replica().name(), e.replica().key().origin(), it->second.record.origin());
                if (metrics_) metrics_->events_ignored->Add({{"reason", "other_origin"}}).Increment();
              } else if (it == active_.end() && metrics_) {
                // A job that ended (its last replicas' stops arrive after it), or not ours.
                metrics_->events_ignored->Add({{"reason", "job_not_active"}}).Increment();
              }
              if (ours) {
                int index = IndexOf(it->second.record, e.replica().key().task_index(), e.replica().key().replica_index());
                if (index >= 0 && ApplyReportLocked(it->second, index, e.replica())) {
                  write = it->second.record;
                  version = ++it->second.version;
                }
              }
              stops = TakeStopsLocked();
            }
            // The cursor rides along with job writes; alone, it is written at most once a
            // second (events replayed after a restart change nothing twice).
            absl::Status saved;
            if (version > 0) {
              saved = jobs_.Save(write, version, center_id, e.cursor());
              last_cursor_save = absl::Now();
            } else if (absl::Now() - last_cursor_save >= absl::Seconds(1)) {
              saved = jobs_.SaveCursor(center_id, e.cursor());
              last_cursor_save = absl::Now();
            }
            if (!saved.ok()) {
              StepDown(absl::StrCat("writing an event of ", center_id, " failed: ", saved.message()));
              return;
            }
            if (version > 0) ForgetEnded({{write, version}});
            SendStops(stops);
          },
          [this, term] { return stopping_.load() || term_.load() != term; });
      if (absl::IsOutOfRange(s) && !stopping_) {
        // The adapter no longer has the events after our cursor (its log was compacted,
        // or its store was reset): start over from its first event, and ask it by key for
        // every replica there, so that nothing waits on an event that will not come.
        spdlog::warn("job manager: the event stream of {} cannot resume from cursor {} ({}); reading every replica "
                     "there and watching from the start",
                     center_id, cursor, std::string(s.message()));
        if (metrics_) metrics_->watch_resyncs->Increment();
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (term_ == term) cursors_[center_id] = 0;
        }
        dispatch_pool_.Run([this] { Reconcile(true); });
      } else if (!s.ok() && !stopping_) {
        spdlog::debug("job manager: watch of {}: {}", center_id, s.ToString());
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      watch_connected_.erase(center_id);
    }
    // Reconnect after a pause; the cursor makes the adapter replay what was missed.
    for (int i = 0; i < 10 && !stopping_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void JobManager::Reconcile(bool all) {
  if (!leading_) return;
  // Replicas on centers whose event stream is down (or all, after taking over) are asked
  // directly, by key.
  std::vector<std::tuple<std::string, int, std::string, apb::ReplicaKey>> asks;
  uint64_t term = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    term = term_;
    for (const auto& [id, job] : active_) {
      for (int i = 0; i < job.record.replicas_size(); ++i) {
        const auto& rep = job.record.replicas(i);
        bool live = rep.state() == v1::ReplicaRecord::PENDING || rep.state() == v1::ReplicaRecord::RUNNING;
        if (live && (all || !watch_connected_.count(rep.center_id()))) {
          asks.emplace_back(id, i, rep.center_id(), KeyOf(job.record, i));
        }
      }
    }
  }
  for (const auto& [id, index, center, key] : asks) {
    auto address = AdapterAddress(center);
    if (!address.ok()) continue;
    auto replica = adapters_->Get(*address, key);
    if (!replica.ok() && replica.status().code() != absl::StatusCode::kNotFound) continue;  // asked again later
    v1::JobRecord write;
    int64_t version = 0;
    std::vector<Dispatch> resubmit;
    std::vector<std::pair<std::string, apb::ReplicaKey>> stops;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (term_ != term) return;
      auto it = active_.find(id);
      if (it == active_.end()) continue;
      auto* rep = it->second.record.mutable_replicas(index);
      if (replica.ok()) {
        if (!ApplyReportLocked(it->second, index, *replica)) continue;
      } else {
        // The center does not know a replica it acknowledged (its adapter lost its
        // book): submitted again under the same key, as if never acknowledged.
        bool live = rep->state() == v1::ReplicaRecord::PENDING || rep->state() == v1::ReplicaRecord::RUNNING;
        if (!live || rep->attempt() != key.attempt()) continue;
        spdlog::warn("job manager: center {} no longer knows replica {}/{} of {}; submitting it again by key", center,
                     rep->task_index(), rep->replica_index(), id);
        rep->set_state(v1::ReplicaRecord::DISPATCHING);
        rep->set_message(absl::StrCat("center ", center, " no longer knew this replica; submitting it again"));
        resubmit.push_back({id, index, rep->attempt(), center});
      }
      *it->second.record.mutable_updated_at() = ToTimestamp(clock_->Now());
      write = it->second.record;
      version = ++it->second.version;
      stops = TakeStopsLocked();
    }
    if (absl::Status s = jobs_.Save(write, version); !s.ok()) {
      StepDown(absl::StrCat("writing what ", center, " reported of ", id, " failed: ", s.message()));
      return;
    }
    ForgetEnded({{write, version}});
    SendStops(stops);
    SendDispatches(std::move(resubmit), term);
  }
}

absl::Status JobManager::StopJob(const std::string& job_id) {
  if (!leading_) return StandbyError();
  v1::JobRecord write;
  int64_t version = 0;
  std::string ended;
  std::vector<std::pair<std::string, apb::ReplicaKey>> stops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!leading_) return absl::UnavailableError("this jobs instance stopped leading; retry");
    auto it = active_.find(job_id);
    if (it == active_.end() || it->second.record.status() == kCompleted || it->second.record.status() == kFailed) {
      ended = it != active_.end() ? it->second.record.status() : "";
    } else {
    JobEffects fx;
    ApplyStopRequested(it->second.record, clock_->Now(), &fx);
    ApplyEffectsLocked(it->second, fx);
    write = it->second.record;
    version = ++it->second.version;
    stops = TakeStopsLocked();
    }
  }
  if (version == 0) {
    // Not in memory (or ended there): the store says how it ended, or that it does not exist.
    if (ended.empty()) {
      auto stored = jobs_.Get(job_id);
      if (!stored.ok()) return stored.status();
      ended = stored->status();
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " has already ended (", ended, "); there is nothing to stop"));
  }
  if (absl::Status s = jobs_.Save(write, version); !s.ok()) {
    StepDown(absl::StrCat("writing the stop of ", job_id, " failed: ", s.message()));
    return absl::UnavailableError(absl::StrCat("the stop of ", job_id, " was not recorded (", s.message(),
                                               "); nothing was stopped, retry"));
  }
  ForgetEnded({{write, version}});
  SendStops(stops);
  return absl::OkStatus();
}

v1::TrainJob JobManager::ToTrainJob(const v1::JobRecord& r) const {
  v1::TrainJob j;
  const auto& req = r.request();
  j.set_job_id(r.job_id());
  j.set_name(req.name());
  j.set_status(r.status());
  j.set_user_name(req.user_name());
  j.set_desc(req.desc());
  j.set_created_user(req.created_user());
  j.set_status_policy(req.status_policy());
  *j.mutable_retry_policy() = req.retry_policy();
  *j.mutable_scheduling() = req.scheduling();
  *j.mutable_created_at() = r.received_at();
  *j.mutable_updated_at() = r.updated_at();
  j.set_status_reason(!r.status_reason().empty() ? r.status_reason() : r.waiting_reason());
  for (int t = 0; t < req.tasks_size(); ++t) {
    const auto& task = req.tasks(t);
    auto* info = j.add_task_infos();
    info->set_name(task.name());
    info->set_command(task.command());
    info->set_image_id(task.image_id());
    info->set_resource_spec_id(task.resource_spec_id());
    info->set_replica_number(task.replica_number());
    std::vector<std::string> centers;
    for (const auto& rep : r.replicas()) {
      if (rep.task_index() != t) continue;
      info->add_replica_status(ReplicaStatus(rep.state()));
      if (!rep.center_id().empty() && std::find(centers.begin(), centers.end(), rep.center_id()) == centers.end()) {
        centers.push_back(rep.center_id());
      }
    }
    for (auto& c : centers) info->add_center_ids(c);
  }
  return j;
}

absl::StatusOr<v1::TrainJob> JobManager::Get(const std::string& job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) return ToTrainJob(it->second.record);
  }
  auto stored = jobs_.Get(job_id);
  if (!stored.ok()) return stored.status();
  return ToTrainJob(*stored);
}

absl::StatusOr<v1::ListTrainJobsResponse> JobManager::List(const v1::ListTrainJobsRequest& request) {
  auto page = jobs_.List(request);
  if (!page.ok()) return page.status();
  v1::ListTrainJobsResponse resp;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& stored : page->first) {
    // The in-memory record is newer than the stored one while writes are in flight.
    auto it = active_.find(stored.job_id());
    *resp.add_jobs() = ToTrainJob(it != active_.end() ? it->second.record : stored);
  }
  resp.set_next_page_token(page->second);
  return resp;
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

absl::StatusOr<std::string> JobManager::ReadLog(const std::string& job_id, int task_index, int replica_index) {
  if (auto url = LogUrl(job_id, task_index, replica_index); !url.ok()) return url.status();
  v1::JobRecord record;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) record = it->second.record;
  }
  if (record.job_id().empty()) {
    auto stored = jobs_.Get(job_id);
    if (!stored.ok()) return stored.status();
    record = std::move(*stored);
  }
  int index = IndexOf(record, task_index, replica_index);
  const auto& rep = record.replicas(index);
  if (rep.center_id().empty() || rep.state() == v1::ReplicaRecord::DISPATCHING ||
      rep.state() == v1::ReplicaRecord::STAGING) {
    return absl::FailedPreconditionError(
        absl::StrCat("replica ", replica_index, " of task ", task_index, " has not started: no log yet"));
  }
  auto address = AdapterAddress(rep.center_id());
  if (!address.ok()) return address.status();
  return adapters_->ReadLog(*address, KeyOf(record, index), options_.max_log_bytes);
}

void JobManager::EnableMetrics(prometheus::Registry& registry) {
  auto m = std::make_unique<Metrics>();
  m->scheduling_time = &prometheus::BuildHistogram()
                            .Name("jc_scheduling_time_seconds")
                            .Help("Scheduling time T = t_s - t_r per job (formula 3): request received to every "
                                  "sub-task handed to a center")
                            .Register(registry)
                            .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                                             0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  m->dispatch_batch = &prometheus::BuildHistogram()
                           .Name("jc_dispatch_batch_replicas")
                           .Help("Replicas per submit call to an adapter (dispatches that queued while the "
                                 "center's senders were busy go together)")
                           .Register(registry)
                           .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256});
  auto& scheduled = prometheus::BuildCounter()
                        .Name("jc_jobs_scheduled_total")
                        .Help("Jobs whose every sub-task was handed to a center (throughput N of formula 4)")
                        .Register(registry);
  m->scheduled = &scheduled.Add({});
  auto& failures = prometheus::BuildCounter()
                       .Name("jc_dispatch_failures_total")
                       .Help("Replica submits to adapters that failed: transient (retried) or refused")
                       .Register(registry);
  m->dispatch_transient = &failures.Add({{"kind", "transient"}});
  m->dispatch_refused = &failures.Add({{"kind", "refused"}});
  m->queue_length = &prometheus::BuildGauge()
                         .Name("jc_job_queue_length")
                         .Help("Jobs with replicas waiting to be placed")
                         .Register(registry)
                         .Add({});
  m->jobs = &prometheus::BuildGauge().Name("jc_jobs").Help("Jobs not ended, by status").Register(registry);
  m->ended = &prometheus::BuildCounter().Name("jc_jobs_ended_total").Help("Jobs ended, by status").Register(registry);
  m->step_downs = &prometheus::BuildCounter()
                       .Name("jc_jobs_step_downs_total")
                       .Help("Times this job manager stopped leading: a write failed, or the lease was lost; it "
                             "leads again from the store")
                       .Register(registry)
                       .Add({});
  m->watch_resyncs = &prometheus::BuildCounter()
                          .Name("jc_job_watch_resyncs_total")
                          .Help("Adapter event streams that could not resume from the job manager's cursor: every "
                                "replica there was read again")
                          .Register(registry)
                          .Add({});
  m->events_ignored = &prometheus::BuildCounter()
                           .Name("jc_job_events_ignored_total")
                           .Help("Adapter events that changed no job, by reason (job_not_active, other_origin)")
                           .Register(registry);
  std::lock_guard<std::mutex> lock(mu_);
  metrics_ = std::move(m);
  UpdateGauges();
}

void JobManager::UpdateGauges() {
  if (!metrics_) return;
  metrics_->queue_length->Set(static_cast<double>(queue_.size()));
  int pending = 0, running = 0;
  for (const auto& [id, job] : active_) {
    if (job.record.status() == kCompleted || job.record.status() == kFailed) continue;  // being written
    if (job.record.status() == kRunning) {
      ++running;
    } else {
      ++pending;
    }
  }
  metrics_->jobs->Add({{"status", kPending}}).Set(pending);
  metrics_->jobs->Add({{"status", kRunning}}).Set(running);
}

}  // namespace jc::jobs
