#pragma once

// The agents' streams at a leading master (issue 48): each agent holds one
// Master.AgentStream call open; its heartbeats come up it and the master's launch batches
// go down it, a frame each instead of a call each. The streams are kept by the agent's
// address (what its heartbeats report), so that the master's dialer sends a launch batch
// down the stream of the agent it was meant for and calls the agent as before when none
// is open (an agent run with --master_stream=false, or between two streams).

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/server_callback.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/call_deadlines.h"
#include "executor/auth/munge_auth.h"
#include "executor/master/agent_dialer.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

class Master;

class AgentStreams {
 public:
  // One open stream's state, shared by its reactor and the dialer (stream_link in the .cc).
  class Link;

  // The reactor for a new AgentStream call: the agent's hello is checked (its munge
  // credential of root or `agent_uid`), the master's welcome sent, and then heartbeats go
  // to `master` and launch answers to whoever waits for them.
  grpc::ServerBidiReactor<pb::AgentStreamFrame, pb::AgentStreamFrame>* Serve(grpc::CallbackServerContext* ctx,
                                                                               Master* master, const MungeAuth& auth,
                                                                               uid_t agent_uid);

  // Launches down the stream of the agent at `address`, one result per request as
  // AgentDialer::LaunchBatch; nullopt when no stream of that agent is open. A stream that
  // ends, or an answer later than `timeout`, fails every launch it carried (UNAVAILABLE,
  // DEADLINE_EXCEEDED), as a call that ends so does: the agent may have started them, and
  // its heartbeats say.
  std::optional<std::vector<absl::StatusOr<int>>> LaunchBatch(const std::string& address,
                                                              const std::vector<pb::LaunchRequest>& reqs,
                                                              absl::Duration timeout);
  // Streams open now (of agents that sent a heartbeat on them).
  size_t size() const;
  // nexec_agent_streams (open now) and nexec_agent_stream_launches_total (tasks launched
  // down them), on the master's /metrics.
  void EnableMetrics(prometheus::Registry& registry);

  // The stream of the agent at `address` from now on (its heartbeat said so); a stream
  // that ends is forgotten.
  void Register(const std::string& address, const std::shared_ptr<Link>& link);
  void Forget(const std::string& address, const Link* link);
  // A stream whose hello has not come within this is cancelled: a caller cannot hold
  // streams open without proving itself.
  static constexpr absl::Duration kHelloWithin = absl::Seconds(5);
  CallDeadlines& deadlines() { return deadlines_; }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Link>> by_address_;
  prometheus::Gauge* open_ = nullptr;          // set before any stream (EnableMetrics)
  prometheus::Counter* launched_ = nullptr;
  CallDeadlines deadlines_;
};

// Launches down an agent's stream when one is open, through `calls` otherwise; everything
// else through `calls`.
std::unique_ptr<AgentDialer> MakeStreamingDialer(std::unique_ptr<AgentDialer> calls,
                                                 std::shared_ptr<AgentStreams> streams);

}  // namespace jc::nexec
