#pragma once

// How the nexec master reaches an agent: over gRPC in the daemon (master_service.cc), a
// fake in unit tests.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

namespace pb = ::nexec::v1;

// What an agent says when a master's term is over (it has heard from a later leader): the
// master that hears it stops acting (master.cc OnLaunched).
inline constexpr char kStaleTermWords[] = "no longer leads";
inline bool IsStaleTerm(const absl::Status& s) {
  return absl::IsFailedPrecondition(s) && s.message().find(kStaleTermWords) != absl::string_view::npos;
}

// How the master reaches an agent.
class AgentDialer {
 public:
  virtual ~AgentDialer() = default;
  // Starts a task; AlreadyExists (the same task attempt already runs) counts as success.
  virtual absl::StatusOr<int> Launch(const std::string& address, const pb::LaunchRequest& req) = 0;
  // Several launches to one agent; one result per request, in order. By default one
  // Launch each.
  virtual std::vector<absl::StatusOr<int>> LaunchBatch(const std::string& address,
                                                       const std::vector<pb::LaunchRequest>& reqs) {
    std::vector<absl::StatusOr<int>> out;
    for (const auto& r : reqs) out.push_back(Launch(address, r));
    return out;
  }
  virtual absl::Status Signal(const std::string& address, const pb::SignalRequest& req) = 0;
  // Tells the agent this master leads in `req.master_term` (a master alone, or a dialer with
  // no agents behind it, has nothing to tell).
  virtual absl::Status Lead(const std::string& address, const pb::LeadRequest& req) { return absl::OkStatus(); }
  // Input for an interactive task; answers the bytes the agent took.
  virtual absl::StatusOr<int64_t> SendInput(const std::string& address, const pb::InputRequest& req) {
    return absl::UnimplementedError("this dialer passes no input");
  }
  // Reads a task's output from `offset`, at most `max_bytes`.
  virtual absl::StatusOr<std::string> ReadLog(const std::string& address,
                                              const pb::ReadLogRequest& req, int64_t max_bytes) = 0;
};

}  // namespace jc::nexec
