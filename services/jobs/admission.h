#pragma once

// Admission (issue 44): whether a project may have one more job, by its quotas (SPEC C6) and
// its budget (issue 31), and what its jobs use, spend and hold against them. The job manager
// decides and feeds this unit its jobs; this unit owns the quotas and budgets read from the
// store, the arithmetic of admitting a job, the recount of use and spend from the jobs once a
// cycle, and which running jobs a budget stops. Everything is in memory: used by the job
// manager's loop only, so it takes no lock.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "jointcloud/v1/identity.pb.h"
#include "jointcloud/v1/job_record.pb.h"
#include "services/jobs/project_budgets.h"
#include "services/jobs/project_quotas.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

/// What admission needs of the catalog, as the scheduler last read it (in memory, no I/O).
class AdmissionCatalog {
 public:
  virtual ~AdmissionCatalog() = default;
  /// The highest price per hour of one replica of `spec_id` at any center that offers it:
  /// what a replica not placed yet may cost at most; 0 when no center offers it.
  virtual double HighestPrice(const std::string& spec_id) const = 0;
  /// The price per hour of `spec_id` at `center_id` in force at `at`; nullopt when the center
  /// does not offer it (any more).
  virtual std::optional<double> PriceAt(const std::string& center_id, const std::string& spec_id,
                                        absl::Time at) const = 0;
  /// CPUs and GPUs of one replica of `spec_id`; nullopt for a spec the catalog does not have.
  virtual std::optional<std::pair<double, double>> Quantity(const std::string& spec_id) const = 0;
};

/// Project quotas and budgets as the job manager admits and schedules jobs by them.
class Admission {
 public:
  /// `catalog` outlives this.
  explicit Admission(const AdmissionCatalog* catalog) : catalog_(catalog) {}

  // ---- What the store says, read beside the decisions (every few seconds). ----
  void SetQuotas(std::map<std::string, v1::ProjectQuota> quotas) { quotas_.Set(std::move(quotas)); }
  /// The month ("2026-11"), each project's budget (monthly > 0) and what its attempts that
  /// ended in that month cost.
  void SetBudgets(std::string month, std::map<std::string, v1::ProjectBudget> budgets,
                  std::map<std::string, double> ended) {
    budgets_.Set(std::move(month), std::move(budgets), std::move(ended));
  }
  const std::map<std::string, v1::ProjectBudget>& budgets() const { return budgets_.budgets(); }
  /// Spent this month over the project's budget; 0 without one.
  double UsedRatio(const std::string& project) const { return budgets_.UsedRatio(project); }

  // ---- Creates. ----
  /// Once per create, before anything is written: ResourceExhausted (naming the limit) when
  /// the job's expected cost does not fit in its project's hard budget beside what is
  /// committed, or the project has as many jobs waiting as its quota allows; else OK, and
  /// the job is counted as committed and waiting until the next recount has it.
  absl::Status Admit(const v1::CreateTrainJobRequest& req);
  /// Once per scale of a service to more replicas (SPEC A17), before anything is written:
  /// ResourceExhausted when `added` more replicas of task `task_index` do not fit in the
  /// project's hard budget beside what is committed (as a create of them would be); else
  /// OK, and they are counted as committed until the next recount has them. The quota on
  /// waiting jobs does not apply (the job is admitted); quotas on running resources hold
  /// the new replicas at placement like any.
  absl::Status AdmitScale(const v1::JobRecord& job, int task_index, int added);
  /// What a job is expected to cost against its project's budget until it ends: each
  /// replica at the highest price its spec has anywhere (it is not placed yet), for the
  /// project's reservation hours (no run time is known before it ends).
  double ExpectedCost(const v1::CreateTrainJobRequest& req) const;

  // ---- Scheduling: quotas on running resources. ----
  /// Whether `project` has a limit on what it runs or queues (a priority grant alone is none).
  bool Limits(const std::string& project) const { return quotas_.Limits(project); }
  /// What `replicas` (indices into r.replicas) of a job need (CPUs, GPUs) by the catalog.
  std::pair<double, double> Need(const v1::JobRecord& r, const std::vector<int>& replicas) const;
  /// Empty when replicas needing `cpus` and `gpus` fit the project's running limits now;
  /// else the reason the job is held, for its statusReason.
  std::string Hold(const std::string& project, double cpus, double gpus) const {
    return quotas_.Hold(project, cpus, gpus);
  }
  /// Replicas just placed: counted until the next recount has them.
  void AddRunning(const std::string& project, double cpus, double gpus) { quotas_.AddRunning(project, cpus, gpus); }
  /// A job that waited was placed whole (its last waiting replicas): it no longer counts
  /// against the project's waiting jobs, without waiting for the next recount (a job can be
  /// created, placed and running between two cycles).
  void Placed(const std::string& project) {
    if (quotas_.Limits(project)) quotas_.RemoveQueued(project);
  }
  /// A usage record just written: its cost counts until the next read of the month has it.
  void AddEnded(const std::string& project, double cost) {
    if (budgets_.Has(project)) budgets_.AddEnded(project, cost);
  }

  // ---- Once a cycle: the recount, from every job in memory. ----
  /// Whether there is anything to recount (some quota or budget).
  bool Counts() const { return !quotas_.empty() || !budgets_.empty(); }
  /// Starts a recount at `now`; then Count each job not ended in memory (those whose create
  /// is not committed yet included), then EndRecount.
  void BeginRecount(absl::Time now);
  /// One job: its placed replicas' CPUs and GPUs and whether it waits (quotas), what its
  /// running attempts cost so far and what it still holds of its reservation (budgets).
  void Count(const v1::JobRecord& r);
  /// Puts the recount in force; returns the budget thresholds crossed since the last one.
  std::vector<ProjectBudgets::Crossing> EndRecount();
  /// After a recount: why a job must stop now, or empty. A job of a project whose hard
  /// budget is reached and that asked for stop_running; or a running job of a hard-budget
  /// project one of whose running attempts has run longer than the budget's
  /// reservation_hours (what its admission reserved for it: past that it would spend what
  /// no one committed). A service or stream past its reservation runs on while the budget
  /// has room beyond what is committed, and stops once it has none (SPEC A17).
  std::string StopReason(const v1::JobRecord& r) const;

 private:
  // What the job's running attempts have cost so far, at the price in force at their start.
  double RunningCost(const v1::JobRecord& r) const;

  const AdmissionCatalog* catalog_;
  ProjectQuotas quotas_;
  ProjectBudgets budgets_;
  // The recount under way (BeginRecount to EndRecount), and when it was taken.
  absl::Time now_ = absl::InfinitePast();
  std::map<std::string, double> running_, reserved_;
};

}  // namespace jc::jobs
