#include "services/jobs/project_quotas.h"

#include "absl/strings/str_cat.h"

namespace jc::jobs {

void ProjectQuotas::AddRunning(const std::string& project, double cpus, double gpus) {
  Use& u = use_[project];
  u.cpus += cpus;
  u.gpus += gpus;
}

std::string ProjectQuotas::Hold(const std::string& project, double cpus, double gpus) const {
  auto q = quotas_.find(project);
  if (q == quotas_.end()) return "";
  auto u = use_.find(project);
  Use use = u == use_.end() ? Use{} : u->second;
  const v1::ProjectQuota& quota = q->second;
  if (quota.max_running_gpus() > 0 && gpus > 0 && use.gpus + gpus > static_cast<double>(quota.max_running_gpus())) {
    return absl::StrCat("held by project quota: project ", project, " runs ", use.gpus, " of its ",
                        quota.max_running_gpus(), " GPUs and this job needs ", gpus, " more");
  }
  if (quota.max_running_cpus() > 0 && cpus > 0 && use.cpus + cpus > static_cast<double>(quota.max_running_cpus())) {
    return absl::StrCat("held by project quota: project ", project, " runs ", use.cpus, " of its ",
                        quota.max_running_cpus(), " CPUs and this job needs ", cpus, " more");
  }
  return "";
}

absl::Status ProjectQuotas::AdmitQueued(const std::string& project) const {
  auto q = quotas_.find(project);
  if (q == quotas_.end() || q->second.max_queued_jobs() <= 0) return absl::OkStatus();
  auto u = use_.find(project);
  int64_t queued = u == use_.end() ? 0 : u->second.queued;
  if (queued < q->second.max_queued_jobs()) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat("project ", project, " has ", queued,
                                                   " jobs waiting for a center, its quota (max_queued_jobs ",
                                                   q->second.max_queued_jobs(),
                                                   "); submit again once some have started, or ask an admin to "
                                                   "raise it"));
}

absl::Status ProjectQuotas::AdmitPriority(const std::string& project, int priority) const {
  if (priority <= 0) return absl::OkStatus();
  if (!read_) {
    return absl::UnavailableError(absl::StrCat("scheduling.priority ", priority,
                                               ": the projects' quotas, which bound it, are not read yet; try again "
                                               "shortly"));
  }
  auto q = quotas_.find(project);
  const int bound = q == quotas_.end() ? 0 : q->second.max_priority();
  if (priority <= bound) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "scheduling.priority ", priority, " is above what project ", project, "'s jobs may ask (its quota's max_priority, ",
      bound, "); ask for at most ", bound, ", or ask a federation admin to raise max_priority"));
}

}  // namespace jc::jobs
