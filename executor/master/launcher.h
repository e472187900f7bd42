#pragma once

// The nexec master's launches, sent off its loop (issue 47: the master's pieces in units of
// their own). The loop decides and commits a launch, then hands it here; one sender per
// agent takes whatever queued for that agent while its previous call was under way as one
// LaunchBatch (common/outbox.h, the component the job manager's dispatch uses too), on the
// master's pool, and the answers go back to the loop through `answered` (posted there, not
// waited on: the sender goes on with its next batch).

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/outbox.h"
#include "common/thread_pool.h"
#include "executor/master/agent_dialer.h"

namespace jc::nexec {

class Launcher {
 public:
  // One call's requests and their answers, in order (an answer short of the requests is
  // filled with an error).
  using Answered = std::function<void(std::vector<pb::LaunchRequest>, std::vector<absl::StatusOr<int>>)>;

  // `dialer` and `pool` outlive the launcher's senders (the pool is joined first).
  Launcher(AgentDialer* dialer, ThreadPool* pool, Answered answered)
      : dialer_(dialer), pool_(pool), answered_(std::move(answered)) {}

  // Queues `request` for the agent at `address` (from any thread).
  void Launch(const std::string& address, pb::LaunchRequest request);

 private:
  void Drain(const std::string& address);  // a sender, on the pool

  AgentDialer* dialer_;
  ThreadPool* pool_;
  Answered answered_;
  // A batch carries at most 2 MiB of launches (a job's spec is at most 1 MiB,
  // Master::BuildRequest), under gRPC's 4 MiB per message: one past it failed the whole
  // batch, every time it was sent again (attacker helper-60).
  static constexpr size_t kMaxBatchBytes = 2 << 20;
  Outboxes<pb::LaunchRequest> outboxes_{0, 1, kMaxBatchBytes,
                                        [](const pb::LaunchRequest& r) { return r.ByteSizeLong(); }};
};

}  // namespace jc::nexec
