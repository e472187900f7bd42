#include "services/jobs/job_view.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/timestamp.h"
#include "services/jobs/job_kind.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {

namespace {

void AddHistory(const v1::JobRecord& r, absl::Time now, v1::TrainJob* j) {
  std::vector<const v1::ReplicaRecord*> replicas;
  for (const auto& rep : r.replicas()) replicas.push_back(&rep);
  std::stable_sort(replicas.begin(), replicas.end(), [](const auto* a, const auto* b) {
    return std::make_pair(a->task_index(), a->replica_index()) < std::make_pair(b->task_index(), b->replica_index());
  });
  for (const v1::ReplicaRecord* rep : replicas) {
    for (const v1::AttemptRecord& a : rep->attempts()) {
      v1::ReplicaAttempt* h = j->add_history();
      h->set_task_index(rep->task_index());
      h->set_replica_index(rep->replica_index());
      h->set_attempt(a.attempt());
      h->set_center_id(a.center_id());
      if (a.has_placed_at()) *h->mutable_placed_at() = a.placed_at();
      if (a.has_started_at()) *h->mutable_started_at() = a.started_at();
      if (a.has_ended_at()) *h->mutable_ended_at() = a.ended_at();
      if (a.has_started_at()) {
        const absl::Time end = a.has_ended_at() ? FromTimestamp(a.ended_at()) : now;
        h->set_elapsed_seconds(std::max(0.0, absl::ToDoubleSeconds(end - FromTimestamp(a.started_at()))));
      }
      h->set_outcome(a.outcome());
      h->set_exit_code(a.exit_code());
      h->set_message(a.message());
    }
  }
}

}  // namespace

v1::JobCost CostOf(const v1::JobRecord& r, const JobViewOptions& options) {
  v1::JobCost cost;
  for (const auto& rep : r.replicas()) {
    const std::string& spec = r.request().tasks(rep.task_index()).resource_spec_id();
    for (const auto& a : rep.attempts()) {
      if (a.has_cost()) {
        cost.set_ended(cost.ended() + a.cost());
      } else if (a.metered() && options.metering) {
        cost.set_partial(true);
      }
      if (a.closed() || !a.has_started_at() || !options.price_at) continue;
      // Running: billed from its start (bounded as its record will be) at the price of its
      // submit, by the hour.
      const absl::Time start = FromTimestamp(a.started_at());
      const absl::Time priced = a.has_submitted_at() ? FromTimestamp(a.submitted_at())
                                : a.has_placed_at()  ? FromTimestamp(a.placed_at())
                                                     : start;
      const std::optional<double> price = options.price_at(a.center_id(), spec, priced);
      // Ended, its record not written yet: up to its end; else up to now.
      const absl::Time until = a.has_ended_at() ? FromTimestamp(a.ended_at()) : options.now;
      if (!a.has_ended_at()) cost.set_running_attempts(cost.running_attempts() + 1);
      if (!price.has_value()) continue;
      cost.set_running(cost.running() + std::max(0.0, *price) * std::max(0.0, absl::ToDoubleHours(until - start)));
    }
  }
  cost.set_total(cost.ended() + cost.running());
  return cost;
}

void AddTaskInfos(const v1::JobRecord& r, google::protobuf::RepeatedPtrField<v1::TaskInfo>* out) {
  const auto& req = r.request();
  for (int t = 0; t < req.tasks_size(); ++t) {
    const auto& task = req.tasks(t);
    auto* info = out->Add();
    info->set_name(task.name());
    info->set_command(task.command());
    info->set_image_id(task.image_id());
    info->set_resource_spec_id(task.resource_spec_id());
    info->set_replica_number(task.replica_number());
    info->set_kind(KindName(KindOf(task)));
    // Per replica, in replica order like replicaStatus (Appendix A: the centers where
    // each replica runs): "" for a replica not placed yet.
    for (const auto& rep : r.replicas()) {
      if (rep.task_index() != t || rep.scaled_away()) continue;  // in the history only
      info->add_replica_status(ReplicaStatus(rep.state()));
      info->add_center_ids(rep.center_id());
      info->add_replica_messages(rep.message());
      if (rep.state() != v1::ReplicaRecord::RUNNING) continue;
      // Its current attempt's endpoints (the record keeps an earlier attempt's until the
      // next one's first report); ready once every port answers (SPEC A17).
      bool ready = true;  // every declared port has a ready endpoint (one each: KeptEndpoints)
      for (const auto& declared : task.ports()) {
        bool found = false;
        for (const auto& e : rep.endpoints()) found |= e.name() == declared.name() && e.ready();
        ready &= found;
      }
      for (const auto& e : rep.endpoints()) {
        auto* out = info->add_endpoints();
        out->set_replica_index(rep.replica_index());
        out->set_name(e.name());
        out->set_port(e.port());
        out->set_ready(e.ready());
        ready &= e.ready();
      }
      if (ready) info->set_ready_replicas(info->ready_replicas() + 1);
    }
  }
}

v1::TrainJob TrainJobOf(const v1::JobRecord& r, const JobViewOptions& options) {
  v1::TrainJob j;
  *j.mutable_cost() = CostOf(r, options);
  const auto& req = r.request();
  j.set_job_id(r.job_id());
  j.set_name(req.name());
  j.set_status(r.status());
  j.set_user_name(req.user_name());
  j.set_project(req.project());
  j.set_desc(req.desc());
  j.set_created_user(req.created_user());
  j.set_status_policy(req.status_policy());
  *j.mutable_retry_policy() = req.retry_policy();
  *j.mutable_scheduling() = req.scheduling();
  *j.mutable_created_at() = r.received_at();
  *j.mutable_updated_at() = r.updated_at();
  j.set_status_reason(!r.status_reason().empty() ? r.status_reason() : r.waiting_reason());
  if (r.status() == kPending) j.set_queue_position(options.queue_position);
  if (req.has_estimated_duration()) *j.mutable_estimated_duration() = req.estimated_duration();
  if (req.has_time_limit()) *j.mutable_time_limit() = req.time_limit();
  if (req.has_idle_timeout()) *j.mutable_idle_timeout() = req.idle_timeout();
  if (r.has_expected()) *j.mutable_expected_duration() = r.expected();
  AddTaskInfos(r, j.mutable_task_infos());
  if (options.with_history) {
    AddHistory(r, options.now, &j);
    // What a resubmit sends again: whoever resubmits is its creator, and a new key (or none).
    *j.mutable_request() = req;
    j.mutable_request()->clear_user_name();
    j.mutable_request()->clear_created_user();
    j.mutable_request()->clear_idempotency_key();
  }
  return j;
}

}  // namespace jc::jobs
