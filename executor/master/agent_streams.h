#pragma once

// The agents' streams at a leading master (issue 48): each agent holds one
// Master.AgentStream call open; its heartbeats come up it and the master's launch batches
// go down it, a frame each instead of a call each. A stream is kept by its host once the
// master took a heartbeat on it as that host, available at the address it reported; the
// master's dialer sends a launch batch down a stream only when the batch is for that host
// (LaunchRequest.host) at that address, and calls the agent as before otherwise (an agent
// run with --master_stream=false, between two streams, or a stream that claimed another
// host's address: attacker helper-59 took a host's launches with one before).

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

  // Launches down the stream of the agent of the requests' host at `address`, one result
  // per request as AgentDialer::LaunchBatch; nullopt when no such stream is open. A stream
  // that ends, or an answer later than `timeout`, fails every launch it carried
  // (UNAVAILABLE, DEADLINE_EXCEEDED), as a call that ends so does: the agent may have
  // started them, and its heartbeats say.
  std::optional<std::vector<absl::StatusOr<int>>> LaunchBatch(const std::string& address,
                                                              const std::vector<pb::LaunchRequest>& reqs,
                                                              absl::Duration timeout);
  // Streams open now (of agents that sent a heartbeat on them).
  size_t size() const;
  // nexec_agent_streams (open now) and nexec_agent_stream_launches_total (tasks launched
  // down them), on the master's /metrics.
  void EnableMetrics(prometheus::Registry& registry);

  // The stream of `host`'s agent at `address` from now on (the master took its heartbeat
  // as that host there), unless it ended; a stream that ends, or whose heartbeat was not
  // taken so, is forgotten.
  void Register(const std::string& host, const std::string& address, const std::shared_ptr<Link>& link);
  void Forget(const Link* link);
  // The most a stream holds unsent: past it the agent is not reading, and the stream ends
  // (a flood of heartbeats whose answers were never read grew the master by gigabytes).
  static constexpr size_t kMaxQueuedFrames = 1024;
  static constexpr size_t kMaxQueuedBytes = 64 << 20;
  // A stream whose hello has not come within this is cancelled: a caller cannot hold
  // streams open without proving itself.
  static constexpr absl::Duration kHelloWithin = absl::Seconds(5);
  CallDeadlines& deadlines() { return deadlines_; }

 private:
  mutable std::mutex mu_;
  struct Registered {
    std::string address;
    std::shared_ptr<Link> link;
  };
  std::map<std::string, Registered> by_host_;
  std::map<const Link*, std::string> host_of_;  // the host each registered link is kept for
  prometheus::Gauge* open_ = nullptr;          // set before any stream (EnableMetrics)
  prometheus::Counter* launched_ = nullptr;
  CallDeadlines deadlines_;
};

// Launches down an agent's stream when one is open, through `calls` otherwise; everything
// else through `calls`.
std::unique_ptr<AgentDialer> MakeStreamingDialer(std::unique_ptr<AgentDialer> calls,
                                                 std::shared_ptr<AgentStreams> streams);

}  // namespace jc::nexec
