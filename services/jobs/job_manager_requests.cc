// The job manager's requests (SPEC A1, A12, A16): a create, a stop and a scale, each
// checked where it enters, posted to the loop and answered once its write committed. The
// rest of the job manager is in job_manager.cc.

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <google/protobuf/util/message_differencer.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/auth/api_token.h"
#include "common/status_macros.h"
#include "common/timestamp.h"
#include "services/estimator/job_class.h"
#include "services/jobs/endpoint_token.h"
#include "services/jobs/job_kind.h"
#include "services/jobs/job_manager.h"
#include "services/jobs/job_state.h"
#include "services/jobs/status_policy.h"
#include "services/jobs/validate_create.h"

namespace jc::jobs {

namespace {

absl::Status WriteTimedOut(absl::string_view what, absl::Duration waited, absl::string_view then) {
  return absl::DeadlineExceededError(absl::StrCat("the job manager did not acknowledge ", what, " within ",
                                                  absl::FormatDuration(waited), " (its store may be unreachable); ",
                                                  then));
}

// Whether `req` is a retry of the create that made `job`: the same caller, project and body.
// A key sent again by another caller, in another project (one the caller left), or with
// another body says nothing of that job: refused, naming nothing of it (attacker helper-51:
// a member removed from a project read its job's command and status by reusing the key).
absl::Status SameCreateAs(const v1::JobRecord& job, const v1::CreateTrainJobRequest& req) {
  v1::CreateTrainJobRequest stored = job.request(), asked = req;
  const bool same_caller = stored.user_name() == asked.user_name() && stored.project() == asked.project();
  if (same_caller && google::protobuf::util::MessageDifferencer::Equals(stored, asked)) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat(
      "Idempotency-Key \"", req.idempotency_key().substr(0, 64), "\" was used ",
      same_caller ? "for another job body" : "by another create",
      ": a retry sends the same body with the same key; a new job needs a new key"));
}

}  // namespace

absl::StatusOr<v1::CreateTrainJobResponse> JobManager::Create(v1::CreateTrainJobRequest req,
                                                              std::optional<v1::AuditRecord> audit) {
  // t_r of formula 3 is when the request reached the job service, not when the loop got to
  // it: a create that waits behind a burst's commit waits inside T.
  const absl::Time received = clock_->Now();
  if (!leading_) return StandbyError();
  NormalizeCreate(req);
  if (absl::Status s = ValidateCreate(req); !s.ok()) return s;
  if (req.has_idle_timeout() && activity_.load() == nullptr) {
    return absl::FailedPreconditionError(
        "idleTimeout: this control plane runs no endpoint listener (--endpoint_address) to count the job's use");
  }
  if (absl::Status s = scheduler_->Validate(req); !s.ok()) return s;
  std::string key = req.idempotency_key();
  auto existing_job = [&]() -> absl::StatusOr<std::optional<v1::CreateTrainJobResponse>> {
    if (key.empty()) return std::nullopt;
    auto existing = jobs_.FindByKey(key);
    if (!existing.ok()) return existing.status();
    if (!existing->has_value()) return std::nullopt;
    if (absl::Status same = SameCreateAs(**existing, req); !same.ok()) return same;
    return ResponseOf(**existing);
  };
  if (auto existing = existing_job(); !existing.ok() || existing->has_value()) {
    if (!existing.ok()) return existing.status();
    return **existing;
  }
  // A job no registered center could ever run, whatever frees up, is refused now with the
  // reason rather than left waiting for ever (issue 33).
  auto never = scheduler_->NeverRuns(req);
  if (!never.ok()) return never.status();
  if (!never->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no registered center could ever run this job: ", *never));
  }
  auto reply = std::make_shared<OneShot<absl::StatusOr<v1::CreateTrainJobResponse>>>();
  auto answer = reply->Await();
  loop_.Post([this, req = std::move(req), reply, audit = std::move(audit), received]() mutable {
    OnCreate(std::move(req), reply, std::move(audit), received);
  });
  absl::StatusOr<v1::CreateTrainJobResponse> created = absl::UnavailableError("the job manager is stopping; retry");
  // Bounded as a gRPC caller's deadline bounded it (the REST gateway's 30 s): a job manager
  // whose writes do not commit (its store down) keeps no caller's thread for ever. The job
  // may still be written later; an Idempotency-Key's retry then returns it.
  if (!answer.WaitFor(options_.write_wait)) {
    return WriteTimedOut("the job", options_.write_wait, "it may still be created: retry with the same Idempotency-Key");
  }
  // Abandoned (nullopt): the job manager stopped before the create was written.
  if (auto got = answer.Take()) created = std::move(*got);
  if (created.status().code() == absl::StatusCode::kAlreadyExists && !key.empty()) {
    // The same key raced us in: answer with the job it created.
    if (auto existing = existing_job(); existing.ok() && existing->has_value()) return **existing;
  }
  return created;
}

void JobManager::OnCreate(v1::CreateTrainJobRequest req, CreateReply reply, std::optional<v1::AuditRecord> audit,
                          absl::Time received) {
  if (!leading_) {
    reply->Send(StandbyError());
    return;
  }
  const std::string key = req.idempotency_key();
  if (!key.empty()) {
    if (auto k = keys_.find(key); k != keys_.end()) {
      // A create with this key is in memory: answered with its job, once that is recorded.
      if (auto a = active_.find(k->second); a != active_.end()) {
        if (absl::Status same = SameCreateAs(a->second.record, req); !same.ok()) {
          reply->Send(same);
          return;
        }
        reply->Send(ResponseOf(a->second.record));
      } else {
        key_waiters_[k->second].push_back(reply);
      }
      return;
    }
  }
  // A project's hard budget or its quota on waiting jobs: refused at admission, before
  // anything is written.
  if (absl::Status admitted = admission_.Admit(req); !admitted.ok()) {
    reply->Send(admitted);
    return;
  }
  // A secret between the endpoint listener and the job's replicas, where it has ports.
  std::string endpoint_token;
  bool has_ports = false;
  for (const auto& task : req.tasks()) has_ports |= task.ports_size() > 0;
  if (has_ports) {
    auto token = auth::RandomSecret(32);
    if (!token.ok()) {
      reply->Send(token.status());
      return;
    }
    endpoint_token = *std::move(token);
  }
  NewJob c;
  c.reply = std::move(reply);
  c.audit = std::move(audit);
  v1::JobRecord& record = c.job.record;
  record.set_seq(next_seq_++);
  record.set_job_id(absl::StrFormat("job-%08d", record.seq()));
  record.set_origin(origin_);
  record.set_endpoint_token(std::move(endpoint_token));
  absl::Time now = clock_->Now();
  *record.mutable_received_at() = ToTimestamp(std::min(received, now));
  *record.mutable_updated_at() = ToTimestamp(now);
  record.set_status(kPending);
  // What is expected of it now, from what ended before (memory only): orders the queue and
  // is shown with the job. Each task's estimate goes on to its placement below, asked once.
  estimator::TaskEstimates task_estimates;
  if (estimator_ != nullptr) {
    if (auto expected =
            estimator_->EstimateJob(req, absl::Seconds(options_.queue.unknown_expected_s), &task_estimates)) {
      *record.mutable_expected() = estimator::ToProto(*expected);
    }
    c.estimated_at = reestimation_.generation();
  }
  for (int t = 0; t < req.tasks_size(); ++t) {
    for (int r = 0; r < req.tasks(t).replica_number(); ++r) {
      auto* rep = record.add_replicas();
      rep->set_task_index(t);
      rep->set_replica_index(r);
    }
  }
  *record.mutable_request() = std::move(req);
  c.job.version = 1;
  // Placed before the write when no earlier job waits, so that the job and its placement
  // are one write; dispatched only once that write is durable.
  if (waiting_.FirstInLine(record)) c.dispatches = Schedule(c.job, estimator_ != nullptr ? &task_estimates : nullptr);
  c.snapshot = std::make_shared<const v1::JobRecord>(record);
  creating_[record.job_id()] = c.snapshot;
  if (!key.empty()) keys_[key] = record.job_id();
  burst_.creates.push_back(std::move(c));
}

absl::Status JobManager::StopJob(const std::string& job_id, std::optional<v1::AuditRecord> audit) {
  if (!leading_) return StandbyError();
  auto reply = std::make_shared<OneShot<std::optional<absl::Status>>>();
  auto answer = reply->Await();
  loop_.Post([this, job_id, reply, audit = std::move(audit)]() mutable { OnStop(job_id, reply, std::move(audit)); });
  std::optional<absl::Status> stopped = absl::UnavailableError("the job manager is stopping; retry");
  if (!answer.WaitFor(options_.write_wait)) {
    return WriteTimedOut("the stop", options_.write_wait, "it may still take effect: retry, or read the job");
  }
  if (auto got = answer.Take()) stopped = std::move(*got);  // nullopt: abandoned, the job manager stopping
  if (stopped.has_value()) return *stopped;
  // Not in memory: the store says how it ended, or that it does not exist.
  auto stored = jobs_.Get(job_id);
  if (!stored.ok()) return stored.status();
  return absl::FailedPreconditionError(
      absl::StrCat("job ", job_id, " has already ended (", stored->status(), "); there is nothing to stop"));
}

JobManager::Active* JobManager::ActiveToChange(const std::string& job_id, const StopReply& reply) {
  if (!leading_) {
    reply->Send(StandbyError());
    return nullptr;
  }
  auto it = active_.find(job_id);
  if (it == active_.end()) {
    reply->Send(creating_.count(job_id) ? std::optional<absl::Status>(absl::UnavailableError(
                                                   absl::StrCat("job ", job_id, " is still being recorded; retry")))
                                             : std::nullopt);
    return nullptr;
  }
  return &it->second;
}

void JobManager::OnStop(const std::string& job_id, StopReply reply, std::optional<v1::AuditRecord> audit) {
  Active* job = ActiveToChange(job_id, reply);
  if (job == nullptr) return;
  const std::string& status = job->record.status();
  if (status == kCompleted || status == kFailed) {
    reply->Send(absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " has already ended (", status, "); there is nothing to stop")));
    return;
  }
  JobEffects fx;
  ApplyStopRequested(job->record, clock_->Now(), &fx);
  ApplyEffects(*job, fx);
  MarkDirty(job_id);
  burst_.stop_replies.push_back(std::move(reply));
  if (audit.has_value()) burst_.audits.push_back(std::move(*audit));
}

absl::StatusOr<v1::ScaleTrainJobResponse> JobManager::ScaleJob(const std::string& job_id, int task_index,
                                                               int replicas, std::optional<v1::AuditRecord> audit) {
  if (!leading_) return StandbyError();
  auto reply = std::make_shared<OneShot<std::optional<absl::Status>>>();
  auto answer = reply->Await();
  auto previous = std::make_shared<int>(0);
  loop_.Post([this, job_id, task_index, replicas, previous, reply, audit = std::move(audit)]() mutable {
    OnScale(job_id, task_index, replicas, previous, reply, std::move(audit));
  });
  std::optional<absl::Status> scaled = absl::UnavailableError("the job manager is stopping; retry");
  if (!answer.WaitFor(options_.write_wait)) {
    return WriteTimedOut("the scale", options_.write_wait, "it may still take effect: read the job before retrying");
  }
  if (auto got = answer.Take()) scaled = std::move(*got);  // nullopt: abandoned, the job manager stopping
  if (!scaled.has_value()) {
    // Not in memory: the store says how it ended, or that it does not exist.
    auto stored = jobs_.Get(job_id);
    if (!stored.ok()) return stored.status();
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " has already ended (", stored->status(), "); there is nothing to scale"));
  }
  if (!scaled->ok()) return *scaled;
  v1::ScaleTrainJobResponse response;
  response.set_replica_number(replicas);
  response.set_previous_replica_number(*previous);  // written before the reply was sent
  return response;
}

void JobManager::OnScale(const std::string& job_id, int task_index, int replicas, std::shared_ptr<int> previous,
                         StopReply reply, std::optional<v1::AuditRecord> audit) {
  Active* found = ActiveToChange(job_id, reply);
  if (found == nullptr) return;
  Active& job = *found;
  if (absl::Status s = CheckScale(job.record, task_index, replicas); !s.ok()) {
    reply->Send(s);
    return;
  }
  *previous = job.record.request().tasks(task_index).replica_number();
  if (replicas > *previous) {
    // As a create of that many is: a count no registered center could ever run at once is
    // refused now, never left to fail the running service when its waiting replicas turn
    // out unplaceable.
    v1::CreateTrainJobRequest grown = job.record.request();
    grown.mutable_tasks(task_index)->set_replica_number(replicas);
    auto never = scheduler_->NeverRuns(grown);
    if (!never.ok() || !never->empty()) {
      reply->Send(!never.ok() ? never.status()
                                   : absl::InvalidArgumentError(absl::StrCat(
                                         "replicaNumber: no registered center could ever run ", replicas,
                                         " replicas of task ", task_index, " at once: ", *never)));
      return;
    }
  }
  // More replicas commit more of a hard budget, as a create of them would.
  if (absl::Status s = admission_.AdmitScale(job.record, task_index, replicas - *previous); !s.ok()) {
    reply->Send(s);
    return;
  }
  JobEffects fx;
  ApplyScale(job.record, task_index, replicas, clock_->Now(), &fx);
  if (fx.changed) {
    job.request_doc.clear();  // its replica count changed: encoded again
    const size_t stops_before = burst_.stops.size();
    ApplyEffects(job, fx);
    MarkDirty(job_id);
    // Replicas serving a rotation (a task with ports) finish what they are answering first.
    if (job.record.request().tasks(task_index).ports_size() > 0 && options_.scale_down_drain > absl::ZeroDuration()) {
      std::move(burst_.stops.begin() + static_cast<std::ptrdiff_t>(stops_before), burst_.stops.end(),
                std::back_inserter(burst_.drained_stops));
      burst_.stops.resize(stops_before);
    }
  }
  // Answered once committed (with the audit row, even when nothing else changed).
  burst_.stop_replies.push_back(std::move(reply));
  if (audit.has_value()) burst_.audits.push_back(std::move(*audit));
}

}  // namespace jc::jobs
