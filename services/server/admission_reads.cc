#include "services/server/admission_reads.h"

#include "common/status_macros.h"

namespace jc::server {

absl::StatusOr<std::vector<::jointcloud::v1::Project>> ServiceAdmissionReads::Projects() {
  std::vector<::jointcloud::v1::Project> out;
  ::jointcloud::v1::ListProjectsRequest request;
  request.set_page_size(1000);
  do {
    JC_ASSIGN_OR_RETURN(::jointcloud::v1::ListProjectsResponse page, identities_->ListProjects(request));
    for (auto& p : *page.mutable_projects()) out.push_back(std::move(p));
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return out;
}

}  // namespace jc::server
