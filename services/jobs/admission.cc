#include "services/jobs/admission.h"

#include "absl/strings/str_cat.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/timestamp.h"
#include "services/jobs/job_kind.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {

namespace {

// When an attempt started, as far as budgets go: by its center's clock, but never before the
// control plane sent it (or placed it), by its own clock, so that a center cannot make an
// attempt look older than it is (it would spend the budget, or get the job stopped).
absl::Time AttemptStart(const v1::AttemptRecord& a) {
  absl::Time start = FromTimestamp(a.started_at());
  if (a.has_submitted_at()) return std::max(start, FromTimestamp(a.submitted_at()));
  if (a.has_placed_at()) return std::max(start, FromTimestamp(a.placed_at()));
  return start;
}

}  // namespace

absl::Status Admission::Admit(const v1::CreateTrainJobRequest& req) {
  const std::string& project = req.project();
  // Priority ranks above every queue order: a member asks no more than its project was
  // granted (a job without a project is an admin's: not bounded, as quotas do not bound it).
  if (!project.empty()) {
    if (absl::Status admitted = quotas_.AdmitPriority(project, req.scheduling().priority()); !admitted.ok()) {
      return admitted;
    }
  }
  // Both checks before either holds anything: a job refused by one is not counted by the other.
  double expected = 0;
  if (budgets_.Has(project)) {
    if (budgets_.budgets().at(project).hard()) {
      // A job a hard budget cannot price is not admitted as free: right after a start the
      // scheduler may not have read the catalog yet, or no center prices the spec.
      for (const auto& task : req.tasks()) {
        if (catalog_->HighestPrice(task.resource_spec_id()) <= 0) {
          return absl::UnavailableError(absl::StrCat(
              "no price is known for spec ", task.resource_spec_id(), " yet, and project ", project,
              "'s hard budget admits only jobs it can price: try again shortly (a spec no center prices never is)"));
        }
      }
    }
    expected = ExpectedCost(req);
    if (absl::Status admitted = budgets_.Admit(project, expected); !admitted.ok()) return admitted;
  }
  if (quotas_.Limits(project)) {
    if (absl::Status admitted = quotas_.AdmitQueued(project); !admitted.ok()) return admitted;
    quotas_.AddQueued(project);
  }
  if (budgets_.Has(project)) budgets_.AddReserved(project, expected);
  return absl::OkStatus();
}

absl::Status Admission::AdmitScale(const v1::JobRecord& job, int task_index, int added) {
  const std::string& project = job.request().project();
  if (added <= 0 || !budgets_.Has(project)) return absl::OkStatus();
  // The added replicas as a create of their own would ask for them.
  v1::CreateTrainJobRequest more;
  more.set_project(project);
  *more.mutable_retry_policy() = job.request().retry_policy();
  *more.add_tasks() = job.request().tasks(task_index);
  more.mutable_tasks(0)->set_replica_number(added);
  const std::string& spec = more.tasks(0).resource_spec_id();
  if (budgets_.budgets().at(project).hard() && catalog_->HighestPrice(spec) <= 0) {
    return absl::UnavailableError(absl::StrCat("no price is known for spec ", spec, " yet, and project ", project,
                                               "'s hard budget admits only replicas it can price: try again shortly"));
  }
  const double expected = ExpectedCost(more);
  if (absl::Status admitted = budgets_.Admit(project, expected); !admitted.ok()) return admitted;
  budgets_.AddReserved(project, expected);
  return absl::OkStatus();
}

double Admission::ExpectedCost(const v1::CreateTrainJobRequest& req) const {
  double per_hour = 0;
  for (const auto& task : req.tasks()) {
    per_hour += std::max(1, task.replica_number()) * catalog_->HighestPrice(task.resource_spec_id());
  }
  // Each retry the job asks for is another attempt, each with its own reservation window:
  // all of them are committed.
  const double attempts = 1 + std::max(0, req.retry_policy().max_retries());
  return per_hour * budgets_.ReservationHours(req.project()) * attempts;
}

std::pair<double, double> Admission::Need(const v1::JobRecord& r, const std::vector<int>& replicas) const {
  double cpus = 0, gpus = 0;
  for (int i : replicas) {
    const auto& task = r.request().tasks(r.replicas(i).task_index());
    auto q = catalog_->Quantity(task.resource_spec_id());
    if (!q.has_value()) continue;  // an unknown spec cannot be placed anyway; the scheduler says so
    cpus += q->first;
    gpus += q->second;
  }
  return {cpus, gpus};
}

void Admission::BeginRecount(absl::Time now) {
  now_ = now;
  quotas_.ResetUse();
  running_.clear();
  reserved_.clear();
}

double Admission::RunningCost(const v1::JobRecord& r) const {
  double so_far = 0;
  for (const auto& rep : r.replicas()) {
    for (const auto& a : rep.attempts()) {
      if (a.closed() || !a.has_started_at()) continue;
      const absl::Time start = AttemptStart(a);
      auto price = catalog_->PriceAt(a.center_id(), r.request().tasks(rep.task_index()).resource_spec_id(), start);
      if (!price.has_value()) continue;
      so_far += *price * std::max(0.0, absl::ToDoubleHours(now_ - start));
    }
  }
  return so_far;
}

void Admission::Count(const v1::JobRecord& r) {
  const std::string& project = r.request().project();
  if (quotas_.Limits(project)) {
    std::vector<int> placed;
    bool waits = false;
    for (int i = 0; i < r.replicas_size(); ++i) {
      const auto& rep = r.replicas(i);
      if (rep.state() == v1::ReplicaRecord::WAITING) {
        waits = true;
      } else if (!Ended(rep.state())) {
        placed.push_back(i);
      }
    }
    auto [cpus, gpus] = Need(r, placed);
    quotas_.AddRunning(project, cpus, gpus);
    if (waits && !r.stop_requested()) quotas_.AddQueued(project);
  }
  if (budgets_.Has(project)) {
    // What its running attempts cost so far is spent; what its reservation has left, it
    // still holds until it ends.
    const double so_far = RunningCost(r);
    running_[project] += so_far;
    if (r.status() != kCompleted && r.status() != kFailed) {
      reserved_[project] += std::max(0.0, ExpectedCost(r.request()) - so_far);
    }
  }
}

std::vector<ProjectBudgets::Crossing> Admission::EndRecount() {
  budgets_.SetRunning(std::move(running_));
  budgets_.SetReserved(std::move(reserved_));
  running_.clear();
  reserved_.clear();
  return budgets_.TakeCrossings();
}

std::string Admission::StopReason(const v1::JobRecord& r) const {
  const std::string& project = r.request().project();
  if (!budgets_.Hard(project) || r.stop_requested() || r.status() == kCompleted || r.status() == kFailed) return "";
  const v1::ProjectBudget& b = budgets_.budgets().at(project);
  if (b.stop_running() && budgets_.Spent(project) >= b.monthly()) {
    return absl::StrFormat("stopped: project %s reached its hard monthly budget (stop_running)", project);
  }
  // A service restarts without end, each attempt a reservation admission never committed
  // (SPEC A17): at a hard budget it stops, stop_running or not.
  if (LongRunning(KindOf(r.request().tasks(0))) && budgets_.Spent(project) >= b.monthly()) {
    return absl::StrFormat("stopped: project %s reached its hard monthly budget (a %s job restarts without end)",
                           project, KindName(KindOf(r.request().tasks(0))));
  }
  // Admission reserved each replica its spec's highest price for the reservation hours: an
  // attempt running longer spends what no one committed, and a burst admitted to the brim
  // would pass the budget by it.
  const double hours = budgets_.ReservationHours(project);
  // A service or stream runs until stopped, longer than any reservation: past its own it
  // runs on while the budget has room beyond what is committed (spent, and what admitted
  // jobs still hold), and stops once it has none, so what others were admitted with stays
  // covered.
  const bool long_running = LongRunning(KindOf(r.request().tasks(0)));
  if (long_running && budgets_.Committed(project) < b.monthly()) return "";
  for (const auto& rep : r.replicas()) {
    for (const auto& a : rep.attempts()) {
      if (a.closed() || !a.has_started_at()) continue;
      if (absl::ToDoubleHours(now_ - AttemptStart(a)) > hours) {
        if (long_running) {
          return absl::StrFormat(
              "stopped: ran past its budget reservation of %g h in project %s (hard budget), whose budget has no "
              "room left beyond what is committed",
              hours, project);
        }
        return absl::StrFormat("stopped: ran past its budget reservation of %g h in project %s (hard budget)", hours,
                               project);
      }
    }
  }
  return "";
}

}  // namespace jc::jobs
