#pragma once

// What a standing-by nexec master answers on its --listen address (issue 47): who leads
// (nexec.v1.Master/Leadership), and to everything else UNAVAILABLE saying where the leader
// is, with its address in the trailing metadata "nexec-leader" for clients that follow it
// (executor/client/master_list.h). It keeps no state: a standby acts on nothing until it
// leads, and then its real service replaces this one. A Leadership call that carries a
// credential is verified and answered in its session, signed (`auth`), as the leader does.

#include <functional>
#include <memory>

#include <grpcpp/generic/async_generic_service.h>

#include "executor/auth/munge_auth.h"
#include "executor/client/master_list.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

std::unique_ptr<grpc::CallbackGenericService> MakeStandbyService(
    std::function<::nexec::v1::LeadershipInfo()> leadership, const MungeAuth& auth);

}  // namespace jc::nexec
