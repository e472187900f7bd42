#pragma once

// What admission reads of other services (SPEC C6, issue 31), through them rather than their
// tables: the projects with their quotas and budgets (the identity service's), and what each
// project's attempts that ended in a period cost (accounting's usage book). The job manager
// asks every --quota_refresh, off its loop, and hands admission what it got; the server wires
// the services in (services/server/app.cc), a test may wire its own.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "jointcloud/v1/identity.pb.h"

namespace jc::jobs {

class AdmissionReads {
 public:
  virtual ~AdmissionReads() = default;
  // Every project, each with its quota and budget.
  virtual absl::StatusOr<std::vector<::jointcloud::v1::Project>> Projects() = 0;
  // Per project, the cost of the usage records of attempts that ended on the days [from, to).
  virtual absl::StatusOr<std::map<std::string, double>> SpentByProject(absl::CivilDay from, absl::CivilDay to) = 0;
};

}  // namespace jc::jobs
