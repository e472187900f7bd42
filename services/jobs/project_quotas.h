#pragma once

// Project quotas across the federation (SPEC C6), as the job manager enforces them when it
// admits jobs: GPUs and CPUs of replicas placed and not ended, and jobs waiting for a
// center. Everything here is in memory: the quotas are read from the store beside the
// decisions (every few seconds), never during one. Used by the job manager's loop only.

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "jointcloud/v1/identity.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

class ProjectQuotas {
 public:
  // The projects' quotas as the store holds them (those with any limit, or a max_priority).
  void Set(std::map<std::string, v1::ProjectQuota> quotas) {
    quotas_ = std::move(quotas);
    read_ = true;
    limited_ = std::any_of(quotas_.begin(), quotas_.end(), [this](const auto& q) { return Limits(q.first); });
  }
  // No project has a limit on what it runs or queues (its use need not be counted).
  bool empty() const { return !limited_; }
  // Whether `project` has a limit on what it runs or queues.
  bool Limits(const std::string& project) const {
    auto q = quotas_.find(project);
    return q != quotas_.end() &&
           (q->second.max_running_gpus() > 0 || q->second.max_running_cpus() > 0 || q->second.max_queued_jobs() > 0);
  }
  // OK when a job of `project` may ask `priority`: at most 0 always (lowering one's own is
  // anyone's), above it up to the project's max_priority. PermissionDenied past it, naming
  // the bound; Unavailable before the quotas were first read (a start: try again shortly).
  absl::Status AdmitPriority(const std::string& project, int priority) const;

  // Usage, recounted from the jobs in memory once per cycle and added to as jobs are
  // placed and created between recounts.
  void ResetUse() { use_.clear(); }
  void AddRunning(const std::string& project, double cpus, double gpus);
  void AddQueued(const std::string& project) { ++use_[project].queued; }
  // A job counted as waiting was placed whole between recounts: it waits no more.
  void RemoveQueued(const std::string& project) {
    if (auto u = use_.find(project); u != use_.end() && u->second.queued > 0) --u->second.queued;
  }

  // Empty when replicas needing `cpus` and `gpus` fit the project's running limits now;
  // else the reason the job is held, for its statusReason.
  std::string Hold(const std::string& project, double cpus, double gpus) const;
  // ResourceExhausted, naming the limit, when one more job may not wait for the project.
  absl::Status AdmitQueued(const std::string& project) const;

 private:
  struct Use {
    double cpus = 0;
    double gpus = 0;
    int64_t queued = 0;
  };
  std::map<std::string, v1::ProjectQuota> quotas_;
  bool read_ = false;  // Set was called: quotas_ is the store's, not "none yet"
  bool limited_ = false;
  std::map<std::string, Use> use_;
};

}  // namespace jc::jobs
