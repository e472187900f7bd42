#pragma once

// The job manager's admission reads, wired to the services that own what it reads: the
// projects (with quotas and budgets) from the identity store, the spend from accounting's
// usage book. Both read the process's store through their owners' code, so the job manager
// knows neither schema.

#include <map>
#include <string>
#include <vector>

#include "services/accounting/usage_book.h"
#include "services/identity/identity_store.h"
#include "services/jobs/admission_reads.h"

namespace jc::server {

class ServiceAdmissionReads final : public jobs::AdmissionReads {
 public:
  ServiceAdmissionReads(identity::IdentityStore* identities, accounting::UsageBook* usage)
      : identities_(identities), usage_(usage) {}

  absl::StatusOr<std::vector<::jointcloud::v1::Project>> Projects() override;
  absl::StatusOr<std::map<std::string, double>> SpentByProject(absl::CivilDay from, absl::CivilDay to) override {
    return usage_->SpentByProject(from, to);
  }

 private:
  identity::IdentityStore* identities_;
  accounting::UsageBook* usage_;
};

}  // namespace jc::server
