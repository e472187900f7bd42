#pragma once

// The executor's configuration: one YAML file with host types, static host attributes,
// user groups and queues (SPEC B1, B5, B6). See docs/executor.md for the reference.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/policy/cluster.h"
#include "executor/policy/limits.h"

namespace jc::nexec {

struct HostStatic {
  std::string type;
  ResourceValues resources;  // static numeric, text and tag resources
  LoadThresholds load_thresholds;
};

struct ExecutorConfig {
  std::vector<HostType> host_types;
  std::map<std::string, HostStatic> hosts;
  std::map<std::string, std::vector<std::string>> user_groups;
  // Who may act on a group's members' jobs (kill, suspend, resume, requeue): LSF's group
  // administrators. They may not submit for them.
  std::map<std::string, std::vector<std::string>> group_admins;
  // Accounts besides root that may submit for any user and act on every job (B9): the
  // account the native adapter runs as, for one.
  std::vector<std::string> administrators;
  std::vector<QueueConfig> queues;
  std::string default_queue;  // the first queue unless `default_queue` names one
  // Resource limits (B7): see executor/policy/limits.h and docs/executor.md.
  std::vector<LimitConfig> limits;
  // The most pending jobs one account may have (LSF's MAX_PEND_JOBS): a submission past it
  // is refused (RESOURCE_EXHAUSTED) until some have started or ended. 0: no limit.
  int max_pend_jobs_per_user = 0;
};

// The configuration used when there is no file: one queue "normal" open to everyone.
ExecutorConfig DefaultConfig();

// Parses YAML text. Errors name the entry and what is wrong with it,
// e.g. `queues[1].balance: expected "pack" or "spread", got "pile"`.
absl::StatusOr<ExecutorConfig> ParseConfig(const std::string& yaml);
absl::StatusOr<ExecutorConfig> LoadConfigFile(const std::string& path);

}  // namespace jc::nexec
