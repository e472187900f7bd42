#include "services/jobs/project_budgets.h"

#include "absl/strings/str_format.h"

namespace jc::jobs {

void ProjectBudgets::Set(std::string month, std::map<std::string, v1::ProjectBudget> budgets,
                         std::map<std::string, double> ended) {
  month_ = std::move(month);
  budgets_ = std::move(budgets);
  ended_ = std::move(ended);
}

double ProjectBudgets::Spent(const std::string& project) const {
  double spent = 0;
  if (auto it = ended_.find(project); it != ended_.end()) spent += it->second;
  if (auto it = running_.find(project); it != running_.end()) spent += it->second;
  return spent;
}

double ProjectBudgets::Committed(const std::string& project) const {
  double committed = Spent(project);
  if (auto it = reserved_.find(project); it != reserved_.end()) committed += it->second;
  return committed;
}

double ProjectBudgets::ReservationHours(const std::string& project) const {
  auto it = budgets_.find(project);
  if (it == budgets_.end() || it->second.reservation_hours() <= 0) return 1.0;
  return it->second.reservation_hours();
}

double ProjectBudgets::UsedRatio(const std::string& project) const {
  auto it = budgets_.find(project);
  if (it == budgets_.end() || it->second.monthly() <= 0) return 0;
  return Spent(project) / it->second.monthly();
}

bool ProjectBudgets::Hard(const std::string& project) const {
  auto it = budgets_.find(project);
  return it != budgets_.end() && it->second.hard();
}

absl::Status ProjectBudgets::Admit(const std::string& project, double expected_cost) const {
  auto it = budgets_.find(project);
  if (it == budgets_.end() || !it->second.hard()) return absl::OkStatus();
  const double budget = it->second.monthly();
  const double spent = Spent(project);
  const double committed = Committed(project);
  // A job that fits exactly is admitted: the tolerance only absorbs the rounding of the sums.
  if (committed + expected_cost <= budget * (1 + 1e-9)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "project %s has spent %.6g and committed %.6g more (its admitted jobs that have not ended, at their "
      "reservation) of its hard monthly budget of %.6g for %s; this job is expected to cost %.6g (its replicas at "
      "their spec's highest price for %g h, the budget's reservation_hours), which does not fit: it is refused until "
      "it fits (jobs end, next month or a larger budget)",
      project, spent, committed - spent, budget, month_, expected_cost, ReservationHours(project)));
}

std::vector<std::string> ProjectBudgets::StopRunning() const {
  std::vector<std::string> out;
  for (const auto& [project, b] : budgets_) {
    if (b.hard() && b.stop_running() && Spent(project) >= b.monthly()) out.push_back(project);
  }
  return out;
}

std::vector<ProjectBudgets::Crossing> ProjectBudgets::TakeCrossings() {
  std::vector<Crossing> out;
  for (const auto& [project, b] : budgets_) {
    double ratio = UsedRatio(project);
    int reached = ratio >= 1 ? 100 : ratio >= 0.8 ? 80 : 0;
    auto& [month, said] = alerted_[project];
    if (month != month_) {
      month = month_;
      said = 0;
    }
    if (reached <= said) continue;
    said = reached;
    out.push_back({project, reached, Spent(project), b.monthly()});
  }
  return out;
}

}  // namespace jc::jobs
