#pragma once

#include <functional>
#include <memory>

#include <grpcpp/impl/codegen/service_type.h>

#include "executor/auth/munge_auth.h"
#include "executor/master/agent_streams.h"
#include "executor/master/master.h"

namespace jc::nexec {

// The gRPC edge of the master (nexec.v1.Master). Every call is verified with `auth`;
// heartbeats are taken only from root or `agent_uid`, the account agents run as.
// `leadership` answers Leadership (who leads: master_lease.h); none: this master alone.
// `streams` serves the agents' streams (AgentStream, issue 48); none: UNIMPLEMENTED, and
// agents heartbeat by calls.
std::unique_ptr<grpc::Service> MakeMasterService(Master* master, const MungeAuth& auth, uid_t agent_uid,
                                                 std::function<pb::LeadershipInfo()> leadership = nullptr,
                                                 std::shared_ptr<AgentStreams> streams = nullptr);

// Reaches agents over gRPC, one channel per agent address, every call signed with `auth`.
std::unique_ptr<AgentDialer> MakeGrpcAgentDialer(const MungeAuth& auth);

}  // namespace jc::nexec
