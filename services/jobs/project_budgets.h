#pragma once

// Project budgets (issue 31) as the job manager enforces them: per calendar month (UTC),
// what a project's attempts that ended this month cost (the usage rollup, read beside the
// decisions every few seconds, plus the records this instance wrote since) and what its
// running attempts have cost so far (recounted from the jobs in memory once a cycle).
// A hard budget refuses the project's new jobs once reached; every budget says when 80%
// and 100% are crossed. A hard budget admits by what is committed: spent, plus what admitted
// jobs that have not ended are expected to cost (issue 44), and admits a job only when its own
// expected cost fits beside that, so a burst of creates does not pass it as long as jobs end
// within their reservation (admission.h stops those that run past it). In memory only, used
// by the job manager's loop only (through admission.h).

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "jointcloud/v1/identity.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

class ProjectBudgets {
 public:
  // What the reader found: the month ("2026-11"), each project's budget (monthly > 0) and
  // what its attempts that ended in that month cost.
  void Set(std::string month, std::map<std::string, v1::ProjectBudget> budgets, std::map<std::string, double> ended);
  bool empty() const { return budgets_.empty(); }
  bool Has(const std::string& project) const { return budgets_.count(project) > 0; }
  const std::map<std::string, v1::ProjectBudget>& budgets() const { return budgets_; }
  // A record written since the last read (its cost counts until the next read has it).
  void AddEnded(const std::string& project, double cost) { ended_[project] += cost; }
  // Once a cycle: what each budgeted project's running attempts have cost so far.
  void SetRunning(std::map<std::string, double> running) { running_ = std::move(running); }
  // Once a cycle: what each budgeted project's admitted jobs that have not ended are still
  // expected to cost (their reservation less what their running attempts cost so far).
  void SetReserved(std::map<std::string, double> reserved) { reserved_ = std::move(reserved); }
  // A job just admitted: its expected cost is held until the next recount has it.
  void AddReserved(const std::string& project, double cost) { reserved_[project] += cost; }
  // Hours of a job's allocation its project reserves at admission (ProjectBudget.reservation_hours).
  double ReservationHours(const std::string& project) const;

  double Spent(const std::string& project) const;
  // Spent plus what admitted jobs are expected to cost still: what a hard budget admits by.
  double Committed(const std::string& project) const;
  // Spent over the budget; 0 without one.
  double UsedRatio(const std::string& project) const;
  // ResourceExhausted, naming what was spent, what is committed, the job's expected cost and
  // the budget, when a job expected to cost `expected_cost` does not fit in the project's hard
  // budget beside what its ended, running and admitted jobs cost or are expected to cost
  // (committed + expected_cost > budget). Soft budgets and projects without one: OK.
  absl::Status Admit(const std::string& project, double expected_cost) const;
  // Whether `project` has a hard budget.
  bool Hard(const std::string& project) const;
  // Hard budgets reached whose project asked that its running jobs be stopped.
  std::vector<std::string> StopRunning() const;

  struct Crossing {
    std::string project;
    int percent = 0;  // 80 or 100
    double spent = 0;
    double budget = 0;
  };
  // Thresholds crossed since the last call, each once per project and month.
  std::vector<Crossing> TakeCrossings();

 private:
  std::string month_;
  std::map<std::string, v1::ProjectBudget> budgets_;
  std::map<std::string, double> ended_;
  std::map<std::string, double> running_;
  std::map<std::string, double> reserved_;
  std::map<std::string, std::pair<std::string, int>> alerted_;  // project -> (month, highest percent said)
};

}  // namespace jc::jobs
