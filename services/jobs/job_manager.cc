#include "services/jobs/job_manager.h"

#include <unistd.h>

#include <cstdlib>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/timestamp.h"
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

// Leaves at once (crash-only: the supervisor restarts the process, which stands by), with
// the log written out.
[[noreturn]] void ExitNow() {
  spdlog::default_logger()->flush();
  std::_Exit(3);
}

std::string DefaultInstanceId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == 0) return "jointcloud";
  return host;
}

}  // namespace

absl::Status JobManager::Start() {
  std::string instance = options_.instance_id.empty() ? DefaultInstanceId() : options_.instance_id;
  lease_ = std::make_unique<store::Lease>(store_, "jobs", instance, options_.lease_ttl);
  absl::StatusOr<bool> held = lease_->TryAcquire(absl::Now());
  if (!held.ok()) return held.status();
  if (*held) return Lead();
  auto current = lease_->Current();
  spdlog::warn("job manager: standing by; {} holds the jobs lease (until {}); this instance takes over when it ends",
               current.ok() ? current->first : "another instance",
               current.ok() ? absl::FormatTime(current->second) : "unknown");
  standby_ = std::thread([this] {
    while (!stopping_) {
      // A released lease is taken within half a second; an expired one, once it expires.
      absl::Duration pause = std::min(lease_->ttl() / 4, absl::Milliseconds(500));
      for (int i = 0; i < 10 && !stopping_; ++i) absl::SleepFor(pause / 10);
      if (stopping_) return;
      absl::StatusOr<bool> won = lease_->TryAcquire(absl::Now());
      if (won.ok() && *won) {
        spdlog::warn("job manager: the jobs lease is ours ({}); taking over", lease_->holder());
        if (absl::Status s = Lead(); !s.ok()) {
          spdlog::critical("job manager: taking over failed: {}", s.ToString());
          ExitNow();  // a half-started leader must not hold the lease; a restart stands by again
        }
        return;
      }
    }
  });
  return absl::OkStatus();
}

void JobManager::RenewLease() {
  absl::Time now = absl::Now();
  if (now - lease_renewed_ < lease_->ttl() / 4) return;
  absl::StatusOr<bool> held = lease_->TryAcquire(now);
  if (held.ok() && *held) {
    lease_renewed_ = now;
    return;
  }
  if ((held.ok() && !*held) || now - lease_renewed_ >= lease_->ttl()) {
    // Another instance leads now (or may: the lease could not be renewed in time). Two
    // leaders would place the same jobs differently, so this one stops at once.
    spdlog::critical("job manager: lost the jobs lease ({}); exiting so that one instance dispatches",
                     held.ok() ? "another instance took it" : held.status().ToString());
    ExitNow();
  }
}

absl::Status JobManager::Lead() {
  lease_renewed_ = absl::Now();
  auto active = jobs_.LoadActive();
  if (!active.ok()) return active.status();
  auto seq = jobs_.MaxSeq();
  if (!seq.ok()) return seq.status();
  auto cursors = jobs_.Cursors();
  if (!cursors.ok()) return cursors.status();
  std::vector<Dispatch> resend;
  std::set<std::string> centers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_seq_ = *seq + 1;
    cursors_ = *cursors;
    for (auto& record : *active) {
      std::string id = record.job_id();
      Active& job = active_[id];
      job.record = std::move(record);
      job.version = 1'000'000;  // above anything written before; Save only needs "newer"
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
    spdlog::info("job manager: {} jobs not ended reloaded ({} replicas to submit again)", active_.size(),
                 resend.size());
  }
  // Creates are taken from here on: job ids continue after the reloaded ones.
  leading_ = true;
  for (const auto& c : centers) EnsureWatcher(c);
  SendDispatches(std::move(resend));
  cycle_.Start(options_.cycle_interval, [this] { RunCycle(); });
  poller_.Start(options_.poll_interval, [this] { PollFallback(); });
  return absl::OkStatus();
}

void JobManager::Stop() {
  stopping_ = true;
  if (standby_.joinable()) standby_.join();
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

absl::Status JobManager::StandbyError() const {
  auto current = lease_ != nullptr ? lease_->Current() : absl::StatusOr<std::pair<std::string, absl::Time>>();
  return absl::UnavailableError(absl::StrCat(
      "this jobs instance is standing by: ", current.ok() && !current->first.empty() ? current->first : "another instance",
      " holds the jobs lease; send the request there, or retry: this instance takes over when that lease ends"));
}

apb::ReplicaKey JobManager::KeyOf(const v1::JobRecord& r, int index) const {
  apb::ReplicaKey key;
  key.set_job_id(r.job_id());
  key.set_task_index(r.replicas(index).task_index());
  key.set_replica_index(r.replicas(index).replica_index());
  key.set_attempt(r.replicas(index).attempt());
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    record.set_seq(next_seq_++);
  }
  record.set_job_id(absl::StrFormat("job-%08d", record.seq()));
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
    if (queue_.empty() || *queue_.begin() > entry) dispatches = ScheduleLocked(job);
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
    bool waits = std::any_of(job.record.replicas().begin(), job.record.replicas().end(),
                             [](const auto& r) { return r.state() == v1::ReplicaRecord::WAITING; });
    if (waits) queue_.insert(entry);
    active_[job.record.job_id()] = std::move(job);
  }
  SendDispatches(std::move(dispatches));
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
      for (int i : indices) {
        r.mutable_replicas(i)->set_state(v1::ReplicaRecord::FAILED);
        r.mutable_replicas(i)->set_message(r.waiting_reason());
      }
      SettleLocked(job);
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
  if (!leading_) return;
  RenewLease();
  std::vector<Dispatch> dispatches;
  std::vector<std::pair<v1::JobRecord, int64_t>> writes;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
      if (active_.count(id) && (it->second.record.status() == kCompleted || it->second.record.status() == kFailed)) {
        active_.erase(id);
      }
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
  }
  // The cycle's decisions are one transaction; dispatch follows once it is durable.
  if (absl::Status s = jobs_.SaveMany(writes); !s.ok()) spdlog::warn("job manager: {}", s.ToString());
  SendDispatches(std::move(dispatches));
}

void JobManager::SendDispatches(std::vector<Dispatch> dispatches) {
  std::vector<std::string> senders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> touched;  // usually one or two centers: not every outbox
    for (auto& d : dispatches) {
      if (d.stage) continue;
      outboxes_[d.center_id].pending.push_back(d);
      if (std::find(touched.begin(), touched.end(), d.center_id) == touched.end()) touched.push_back(d.center_id);
    }
    // A sender per full batch pending plus one, so that a lone dispatch does not wait
    // behind a call in flight; at most kSendersPerCenter. Each sender takes what queued
    // while it was busy as one SubmitReplicas call.
    for (const auto& center : touched) {
      Outbox& box = outboxes_[center];
      if (box.pending.empty()) continue;
      size_t wanted = std::min<size_t>(kSendersPerCenter, 2 + (box.pending.size() - 1) / kSubmitBatch);
      if (static_cast<size_t>(box.senders) < wanted) {
        ++box.senders;
        senders.push_back(center);
      }
    }
  }
  for (auto& d : dispatches) {
    EnsureWatcher(d.center_id);
    if (d.stage) dispatch_pool_.Run([this, d] { Stage(d); });
  }
  for (const auto& center : senders) dispatch_pool_.Run([this, center] { SendBatches(center); });
}

absl::StatusOr<std::string> JobManager::AdapterAddress(const std::string& center_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = addresses_.find(center_id);
    if (it != addresses_.end()) return it->second;
  }
  auto center = centers_->GetCenter(center_id);
  if (!center.ok()) return center.status();
  if (center->adapter_address().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("center ", center_id, " has no adapter_address"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  addresses_[center_id] = center->adapter_address();
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
    std::vector<Dispatch> batch;
    std::vector<apb::SubmitReplicaRequest> reqs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Outbox& box = outboxes_[center_id];
      while (!box.pending.empty() && batch.size() < kSubmitBatch) {
        Dispatch d = std::move(box.pending.front());
        box.pending.pop_front();
        if (auto req = SubmitRequestLocked(d)) {
          batch.push_back(std::move(d));
          reqs.push_back(std::move(*req));
        }
      }
      if (batch.empty()) {
        --box.senders;
        return;
      }
    }
    if (metrics_) metrics_->dispatch_batch->Observe(static_cast<double>(reqs.size()));
    auto address = AdapterAddress(center_id);
    std::vector<absl::StatusOr<apb::Replica>> results =
        address.ok() ? adapters_->SubmitMany(*address, reqs)
                     : std::vector<absl::StatusOr<apb::Replica>>(reqs.size(), address.status());
    std::vector<std::pair<v1::JobRecord, int64_t>> writes;
    std::vector<apb::ReplicaKey> orphans;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < batch.size(); ++i) {
        if (CompleteSubmitLocked(batch[i], results[i], &writes)) orphans.push_back(reqs[i].key());
      }
    }
    // The job ended or moved on while the submit was under way: do not leave it running.
    for (const auto& key : orphans) adapters_->Stop(*address, key).IgnoreError();
    if (absl::Status s = jobs_.SaveMany(writes); !s.ok()) spdlog::warn("job manager: {}", s.ToString());
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
  std::string key =
      scheduler::Scheduler::ReservationKey(d.job_id, rep->task_index(), rep->replica_index(), rep->attempt());
  absl::Time now = clock_->Now();
  if (result.ok()) {
    if (rep->state() == v1::ReplicaRecord::DISPATCHING) rep->set_state(v1::ReplicaRecord::PENDING);
    rep->clear_message();
    *rep->mutable_dispatched_at() = ToTimestamp(now);
    scheduler_->Reported(key, now);
    ApplyReplica(job, d.replica, *result);
    NoteHandedOverLocked(job);
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
    FailAttemptLocked(job, d.replica, std::string(result.status().message()));
  }
  SettleLocked(job);
  *job.record.mutable_updated_at() = ToTimestamp(now);
  // A plain acknowledgement is not written: until the adapter's next event is, the
  // stored replica stays DISPATCHING, and a restart only submits it again, which the
  // adapter answers with the replica it has. Failures, retries and ends are written.
  bool ended = job.record.status() == kCompleted || job.record.status() == kFailed;
  bool acknowledged_only = result.ok() && !Ended(rep->state()) && !ended;
  if (!acknowledged_only) writes->emplace_back(job.record, ++job.version);
  if (ended) active_.erase(it);
  return false;
}

void JobManager::FailAttemptLocked(Active& job, int index, const std::string& why) {
  auto* rep = job.record.mutable_replicas(index);
  rep->set_message(why);
  rep->set_exit_code(-1);
  scheduler_->Forget(scheduler::Scheduler::ReservationKey(job.record.job_id(), rep->task_index(), rep->replica_index(),
                                                          rep->attempt()));
  std::string center = rep->center_id();
  if (!RetryIfAllowed(job.record.request().retry_policy(), rep)) {
    rep->set_state(v1::ReplicaRecord::FAILED);  // the status policy ends the job, stopping the rest
    return;
  }
  queue_.insert({-job.record.request().scheduling().priority(), job.record.seq(), job.record.job_id()});
  if (!job.record.request().scheduling().gang()) return;
  // A gang starts together or not at all: the rest of this attempt is stopped where it
  // was sent, and waits to be placed again with the replica that could not start.
  for (int i = 0; i < job.record.replicas_size(); ++i) {
    auto* other = job.record.mutable_replicas(i);
    if (i == index || Ended(other->state()) || other->state() == v1::ReplicaRecord::WAITING) continue;
    StopAtCenterLocked(job.record, i);
    other->set_attempt(other->attempt() + 1);
    other->set_state(v1::ReplicaRecord::WAITING);
    other->clear_center_id();
    other->clear_dispatched_at();
    other->set_message(absl::StrCat("requeued with its gang: task ", rep->task_index(), " replica ",
                                    rep->replica_index(), " could not start on ", center, ": ", why));
  }
}

void JobManager::StopAtCenterLocked(const v1::JobRecord& r, int index) {
  const auto& rep = r.replicas(index);
  if (rep.center_id().empty()) return;
  apb::ReplicaKey key = KeyOf(r, index);
  std::string center = rep.center_id();
  dispatch_pool_.Run([this, key, center] {
    auto address = AdapterAddress(center);
    if (address.ok()) adapters_->Stop(*address, key).IgnoreError();
  });
  scheduler_->Forget(
      scheduler::Scheduler::ReservationKey(r.job_id(), rep.task_index(), rep.replica_index(), rep.attempt()));
}

void JobManager::Stage(const Dispatch& d) {
  std::vector<std::string> datasets;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
      absl::Status recorded = mover_->AddLocation(name, version, d.center_id, copy->url());
      if (!recorded.ok()) spdlog::warn("job manager: {} staged at {} but not recorded: {}", key, d.center_id, recorded.ToString());
    }
  }
  v1::JobRecord write;
  int64_t version = 0;
  bool submit = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
      FailAttemptLocked(job, d.replica, std::string(staged.message()));
      SettleLocked(job);
    }
    *job.record.mutable_updated_at() = ToTimestamp(clock_->Now());
    write = job.record;
    version = ++job.version;
    if (job.record.status() == kCompleted || job.record.status() == kFailed) active_.erase(it);
  }
  if (absl::Status s = jobs_.Save(write, version); !s.ok()) spdlog::warn("job manager: {}", s.ToString());
  if (submit) {
    Dispatch next = d;
    next.stage = false;
    SendDispatches({next});
  }
}

bool JobManager::ApplyReplica(Active& job, int index, const apb::Replica& replica) {
  auto* rep = job.record.mutable_replicas(index);
  if (replica.key().attempt() != rep->attempt() || Ended(rep->state())) return false;
  if (rep->state() == v1::ReplicaRecord::WAITING) return false;  // an attempt not submitted
  std::string key =
      scheduler::Scheduler::ReservationKey(job.record.job_id(), rep->task_index(), rep->replica_index(), rep->attempt());
  auto before = rep->state();
  switch (replica.state()) {
    case apb::REPLICA_PENDING:
      if (rep->state() == v1::ReplicaRecord::DISPATCHING) rep->set_state(v1::ReplicaRecord::PENDING);
      break;
    case apb::REPLICA_RUNNING:
      rep->set_state(v1::ReplicaRecord::RUNNING);
      break;
    case apb::REPLICA_SUCCEEDED:
      rep->set_state(v1::ReplicaRecord::SUCCEEDED);
      rep->set_exit_code(0);
      scheduler_->Forget(key);
      break;
    case apb::REPLICA_STOPPED:
    case apb::REPLICA_FAILED: {
      rep->set_exit_code(replica.exit_code());
      rep->set_message(replica.message());
      scheduler_->Forget(key);
      if (job.record.stop_requested()) {
        rep->set_state(v1::ReplicaRecord::STOPPED);
      } else if (RetryIfAllowed(job.record.request().retry_policy(), rep)) {
        queue_.insert({-job.record.request().scheduling().priority(), job.record.seq(), job.record.job_id()});
      } else {
        rep->set_state(v1::ReplicaRecord::FAILED);
      }
      break;
    }
    default:
      break;
  }
  if (before == v1::ReplicaRecord::DISPATCHING && rep->state() != before) NoteHandedOverLocked(job);
  return rep->state() != before || replica.state() == apb::REPLICA_FAILED || replica.state() == apb::REPLICA_STOPPED;
}

void JobManager::NoteHandedOverLocked(Active& job) {
  if (job.record.has_scheduled_at()) return;
  bool all_at_centers = std::none_of(job.record.replicas().begin(), job.record.replicas().end(), [](auto& x) {
    return x.state() == v1::ReplicaRecord::WAITING || x.state() == v1::ReplicaRecord::STAGING ||
           x.state() == v1::ReplicaRecord::DISPATCHING;
  });
  if (!all_at_centers) return;
  // t_s of formula 3: every sub-task handed to a center (known from the submit's answer
  // or, when the center is quicker, from its events).
  absl::Time now = clock_->Now();
  *job.record.mutable_scheduled_at() = ToTimestamp(now);
  if (metrics_) {
    metrics_->scheduling_time->Observe(absl::ToDoubleSeconds(now - FromProto(job.record.received_at())));
    metrics_->scheduled->Increment();
  }
}

void JobManager::SettleLocked(Active& job) {
  v1::JobRecord& r = job.record;
  JobOutcome outcome = EvaluateJob(r.request().status_policy(), r.replicas());
  if (r.stop_requested()) outcome = JobOutcome{kFailed, "stopped by the user"};
  std::string previous = r.status();
  r.set_status(outcome.status);
  if (!outcome.ended()) return;
  // Say which replica decided a failure, in its center's words.
  if (outcome.status == kFailed && !r.stop_requested()) {
    for (const auto& rep : r.replicas()) {
      if (rep.state() == v1::ReplicaRecord::FAILED) {
        absl::StrAppend(&outcome.reason, ": task ", rep.task_index(), " replica ", rep.replica_index(), " on ",
                        rep.center_id().empty() ? "no center" : rep.center_id(), ": ", rep.message());
        break;
      }
    }
  }
  r.set_status_reason(outcome.reason);
  // The outcome is decided: nothing of the job runs on.
  for (int i = 0; i < r.replicas_size(); ++i) {
    auto* rep = r.mutable_replicas(i);
    if (Ended(rep->state())) continue;
    if (rep->state() != v1::ReplicaRecord::WAITING) StopAtCenterLocked(r, i);
    rep->set_state(v1::ReplicaRecord::STOPPED);
    rep->set_message(absl::StrCat("stopped: the job ", outcome.status, " (", outcome.reason, ")"));
  }
  queue_.erase({-r.request().scheduling().priority(), r.seq(), r.job_id()});
  if (previous != outcome.status && metrics_) metrics_->ended->Add({{"status", outcome.status}}).Increment();
}

void JobManager::EnsureWatcher(const std::string& center_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || !watched_.insert(center_id).second) return;
  watchers_.emplace_back([this, center_id] { WatchLoop(center_id); });
}

void JobManager::WatchLoop(const std::string& center_id) {
  while (!stopping_) {
    auto address = AdapterAddress(center_id);
    if (address.ok()) {
      uint64_t cursor = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        cursor = cursors_[center_id];
      }
      absl::Time last_cursor_save = absl::InfinitePast();
      absl::Status s = adapters_->Watch(
          *address, cursor,
          [&](const apb::ReplicaEvent& e) {
            v1::JobRecord write;
            int64_t version = 0;
            {
              std::lock_guard<std::mutex> lock(mu_);
              watch_connected_.insert(center_id);
              cursors_[center_id] = std::max(cursors_[center_id], e.cursor());
              auto it = active_.find(e.replica().key().job_id());
              if (it != active_.end()) {
                int index = IndexOf(it->second.record, e.replica().key().task_index(), e.replica().key().replica_index());
                if (index >= 0 && ApplyReplica(it->second, index, e.replica())) {
                  SettleLocked(it->second);
                  *it->second.record.mutable_updated_at() = ToTimestamp(clock_->Now());
                  write = it->second.record;
                  version = ++it->second.version;
                  if (write.status() == kCompleted || write.status() == kFailed) active_.erase(it);
                }
              }
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
            if (!saved.ok()) spdlog::warn("job manager: {}", saved.ToString());
          },
          [this] { return stopping_.load(); });
      if (!s.ok() && !stopping_) spdlog::debug("job manager: watch of {}: {}", center_id, s.ToString());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      watch_connected_.erase(center_id);
    }
    // Reconnect after a pause; the cursor makes the adapter replay what was missed.
    for (int i = 0; i < 10 && !stopping_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void JobManager::PollFallback() {
  // Replicas on centers whose event stream is down are asked directly.
  std::vector<std::tuple<std::string, int, std::string, apb::ReplicaKey>> asks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : active_) {
      for (int i = 0; i < job.record.replicas_size(); ++i) {
        const auto& rep = job.record.replicas(i);
        bool live = rep.state() == v1::ReplicaRecord::PENDING || rep.state() == v1::ReplicaRecord::RUNNING;
        if (live && !watch_connected_.count(rep.center_id())) asks.emplace_back(id, i, rep.center_id(), KeyOf(job.record, i));
      }
    }
  }
  for (const auto& [id, index, center, key] : asks) {
    auto address = AdapterAddress(center);
    if (!address.ok()) continue;
    auto replica = adapters_->Get(*address, key);
    if (!replica.ok()) continue;
    v1::JobRecord write;
    int64_t version = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = active_.find(id);
      if (it == active_.end() || !ApplyReplica(it->second, index, *replica)) continue;
      SettleLocked(it->second);
      write = it->second.record;
      version = ++it->second.version;
      if (write.status() == kCompleted || write.status() == kFailed) active_.erase(it);
    }
    if (absl::Status s = jobs_.Save(write, version); !s.ok()) spdlog::warn("job manager: {}", s.ToString());
  }
}

absl::Status JobManager::StopJob(const std::string& job_id) {
  if (!leading_) return StandbyError();
  v1::JobRecord write;
  int64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(job_id);
    if (it == active_.end()) {
      auto stored = jobs_.Get(job_id);
      if (!stored.ok()) return stored.status();
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " has already ended (", stored->status(), "); there is nothing to stop"));
    }
    it->second.record.set_stop_requested(true);
    SettleLocked(it->second);
    *it->second.record.mutable_updated_at() = ToTimestamp(clock_->Now());
    write = it->second.record;
    version = ++it->second.version;
    active_.erase(it);
  }
  return jobs_.Save(write, version);
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
  std::lock_guard<std::mutex> lock(mu_);
  metrics_ = std::move(m);
  UpdateGauges();
}

void JobManager::UpdateGauges() {
  if (!metrics_) return;
  metrics_->queue_length->Set(static_cast<double>(queue_.size()));
  int pending = 0, running = 0;
  for (const auto& [id, job] : active_) {
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
