#pragma once

// The agent's gRPC edge (nexec.v1.Agent): every call is checked to come from the master's
// account (or root) by its munge credential (B9), then handed to the Agent.

#include <sys/types.h>

#include <memory>

#include "executor/auth/munge_auth.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace jc::nexec {

class Agent;

std::unique_ptr<grpc::Service> MakeAgentService(Agent* agent, const MungeAuth& auth, uid_t master_uid);

}  // namespace jc::nexec
