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

// A launch batch's answer as one result per request, in order: a pid (AlreadyExists: the
// attempt was started before, a success), or why it was not started.
inline std::vector<absl::StatusOr<int>> LaunchResultsOf(const pb::LaunchBatchResponse& resp, size_t sent) {
  std::vector<absl::StatusOr<int>> out;
  for (size_t i = 0; i < sent; ++i) {
    if (i >= static_cast<size_t>(resp.results_size())) {
      out.push_back(absl::InternalError("the agent answered fewer launches than were sent"));
    } else if (const pb::LaunchResult& r = resp.results(static_cast<int>(i));
               r.code() == 0 || r.code() == static_cast<int>(absl::StatusCode::kAlreadyExists)) {
      out.push_back(r.pid());
    } else {
      out.push_back(absl::Status(static_cast<absl::StatusCode>(r.code()), r.message()));
    }
  }
  return out;
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
