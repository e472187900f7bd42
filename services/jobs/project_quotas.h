#pragma once

// Project quotas across the federation (SPEC C6), as the job manager enforces them when it
// admits jobs: GPUs and CPUs of replicas placed and not ended, and jobs waiting for a
// center. Everything here is in memory: the quotas are read from the store beside the
// decisions (every few seconds), never during one. Used by the job manager's loop only.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "jointcloud/v1/identity.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

class ProjectQuotas {
 public:
  void Set(std::map<std::string, v1::ProjectQuota> quotas) { quotas_ = std::move(quotas); }
  bool empty() const { return quotas_.empty(); }
  // Whether `project` has any limit.
  bool Limits(const std::string& project) const { return quotas_.count(project) > 0; }

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
  std::map<std::string, Use> use_;
};

}  // namespace jc::jobs
