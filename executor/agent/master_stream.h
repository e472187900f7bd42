#pragma once

// The agent's end of its stream to the leading master (issue 48, Master.AgentStream): one
// call held open, its heartbeats sent up it and the master's launch batches taken from it,
// instead of a call for each. Opened on the first heartbeat to a master and again after it
// ends; the welcome must be signed by the master's account (or root), as every unary
// answer must (issue 47), and every later frame is sealed under the session it set up
// (stream_session.h).

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "executor/auth/munge_auth.h"
#include "executor/auth/stream_session.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {

class MasterStream {
 public:
  // What the agent answers a launch batch with (Agent::LaunchBatch's results).
  using LaunchHandler = std::function<::nexec::v1::LaunchBatchResponse(const ::nexec::v1::LaunchBatchRequest&)>;
  MasterStream(MungeAuth auth, std::string host, std::vector<uid_t> master_uids, LaunchHandler on_launch);
  ~MasterStream();

  // One heartbeat over the stream to the master at `address` (opened through `stub` when
  // none is open to it), answered within `timeout`; as the unary call: OK with `*resp` set
  // (proven: it came sealed in a session the master's account opened), or why not, with
  // `*leader_named` set when a standby named the leader. UNIMPLEMENTED: that master
  // serves no streams (call it instead).
  // Every write, and the stream's start, is bounded by `timeout` too: a peer that takes
  // nothing (no flow-control window, no stream allowed) has the stream cancelled.
  grpc::Status Heartbeat(const std::string& address, std::shared_ptr<::nexec::v1::Master::Stub> stub,
                         const ::nexec::v1::HeartbeatRequest& req, ::nexec::v1::HeartbeatResponse* resp,
                         std::string* leader_named, absl::Duration timeout);
  // Ends the stream (the next heartbeat opens another). Does not wait for a launch batch
  // being started: the heartbeats go on meanwhile, and the stream's threads are joined
  // once done (a later call, or the destructor).
  void Close();

 private:
  struct Open;  // one opened stream, with its reader and launcher threads
  grpc::Status OpenTo(const std::string& address, std::shared_ptr<::nexec::v1::Master::Stub> stub,
                      absl::Duration timeout);
  // The watchdog: cancels the stream when its start or a write takes past its timeout.
  void Watch(Open* open);
  // The reader: the welcome, heartbeat answers for the loop, launch batches for the launcher.
  void Read(Open* open);
  // The launcher: each launch batch started (on_launch_) and answered, in order, off the
  // reader (a launch that waits on a user's file must not hold up the heartbeats).
  void Launch(Open* open);
  // Joins the closed streams whose threads ended.
  void Reap();

  const MungeAuth auth_;
  const std::string host_;
  const std::vector<uid_t> master_uids_;
  const LaunchHandler on_launch_;
  std::unique_ptr<Open> open_;                  // the heartbeat loop's alone
  std::vector<std::unique_ptr<Open>> closing_;  // closed, their threads not yet joined
};

}  // namespace jc::nexec
