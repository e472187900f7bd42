#pragma once

// A task's output read from the master (ReadLog), for every nexec client that shows it:
// `nexec logs [-f]`, `nexec-run` and the interactive session of `nexec submit -I`.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {

// Makes a signed client context for one call (method name, request).
using ContextFactory =
    std::function<std::unique_ptr<grpc::ClientContext>(absl::string_view, const google::protobuf::Message&)>;

struct FollowOptions {
  // A stream that breaks before the master says the output ended (the master restarting,
  // the connection cut) is asked for again from the first byte not yet written, this many
  // times at most; 0: the first error is the answer.
  int reconnects = 0;
  std::chrono::milliseconds between_reconnects{200};
  // Whether NOT_FOUND is asked again too: for a caller that knows its task exists (it
  // started it), the agent may not know the task's output yet.
  bool task_exists = false;
};

// Writes what `req` names (from req.offset(); following until the task or job ends when
// req.follow()) to `fd` as it comes, every byte once. OK once the master ended the stream
// itself; else the last error (a gRPC status as absl::Status).
absl::Status FollowLog(::nexec::v1::Master::Stub* stub, const ContextFactory& ctx, ::nexec::v1::ReadLogRequest req,
                       int fd, const FollowOptions& options = {});

}  // namespace jc::nexec
