#include "tools/sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace jc::sim {

double Quantile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double pos = p * (values.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - lo);
}

double JainIndex(const std::vector<double>& x) {
  if (x.empty()) return 1;
  double sum = 0, squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
  }
  return squares > 0 ? sum * sum / (x.size() * squares) : 1;
}

double BoundedSlowdown(double jct, double duration, double bound) {
  return std::max(1.0, jct / std::max(duration, bound));
}

RunMetrics ComputeMetrics(const std::vector<JobRecord>& jobs, const std::vector<const TraceJob*>& traces) {
  RunMetrics m;
  m.jobs = static_cast<int>(jobs.size());
  std::vector<double> jct, wait;
  std::map<std::string, std::pair<double, int>> slowdown;  // per project: sum, count
  struct UserSums {
    double slowdown = 0, bounded = 0;
    int jobs = 0;
  };
  std::map<std::pair<std::string, std::string>, UserSums> user_sums;  // per (project, user)
  double first_submit = jobs.empty() ? 0 : jobs.front().submit, last_end = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobRecord& j = jobs[i];
    const TraceJob& t = *traces[i];
    first_submit = std::min(first_submit, j.submit);
    m.cost += j.cost;
    m.energy_kwh += j.energy_j / 3.6e6;
    if (j.start < 0) {
      ++m.never_ran;
    } else {
      wait.push_back(j.start - j.submit);
    }
    if (t.deadline >= 0) {
      ++m.deadline_jobs;
      if (j.end < 0 || j.end > t.deadline) ++m.deadline_misses;
    }
    if (j.end < 0) {
      if (j.start >= 0) ++m.failed;
      continue;
    }
    ++m.completed;
    last_end = std::max(last_end, j.end);
    jct.push_back(j.end - j.submit);
    const double job_slowdown = (j.end - j.submit) / t.duration;
    auto& s = slowdown[t.project];
    s.first += job_slowdown;
    ++s.second;
    UserSums& u = user_sums[{t.project, t.user}];
    u.slowdown += job_slowdown;
    u.bounded += BoundedSlowdown(j.end - j.submit, t.duration);
    ++u.jobs;
  }
  auto mean = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  };
  m.mean_jct = mean(jct);
  m.median_jct = Quantile(jct, 0.5);
  m.p95_jct = Quantile(jct, 0.95);
  m.mean_wait = mean(wait);
  m.median_wait = Quantile(wait, 0.5);
  m.p95_wait = Quantile(wait, 0.95);
  m.makespan = m.completed > 0 ? last_end - first_submit : 0;
  std::vector<double> per_project;
  for (const auto& [project, s] : slowdown) per_project.push_back(s.first / s.second);
  m.jain_fairness = JainIndex(per_project);
  std::vector<double> per_user, per_user_bounded;
  for (const auto& [user, u] : user_sums) {
    const double mean_slowdown = u.slowdown / u.jobs, mean_bounded = u.bounded / u.jobs;
    per_user.push_back(mean_slowdown);
    per_user_bounded.push_back(mean_bounded);
    m.user_slowdown[user] = mean_slowdown;
    m.worst_user_slowdown = std::max(m.worst_user_slowdown, mean_slowdown);
    m.worst_user_bounded_slowdown = std::max(m.worst_user_bounded_slowdown, mean_bounded);
  }
  m.jain_users = JainIndex(per_user);
  m.jain_users_bounded = JainIndex(per_user_bounded);
  return m;
}

}  // namespace jc::sim
