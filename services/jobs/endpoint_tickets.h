#pragma once

// What JobService.OpenEndpoint hands the caller (SPEC A17): a single-use link to a running
// replica's named port on the endpoint listener's origin. Implemented by the endpoint
// listener (services/endpoints), which redeems the links it issued.

#include <string>

#include "absl/status/statusor.h"
#include "common/auth/principal.h"
#include "jointcloud/v1/jobs.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

class EndpointTickets {
 public:
  virtual ~EndpointTickets() = default;
  // A link for `caller` (a member of `project`, checked by the caller of this) to the
  // endpoint `request` names, which is running now. Written before it is returned.
  virtual absl::StatusOr<v1::OpenEndpointResponse> Issue(const auth::Principal& caller, const std::string& project,
                                                         const v1::OpenEndpointRequest& request) = 0;
};

}  // namespace jc::jobs
