#pragma once

// The adapter's end of `jcctl job exec` (SPEC A17; TunnelFrame.exec): the backend's plan
// (backend.h ExecPlan) started on pipes or a pseudo-terminal, and the exec stream
// (common/exec/exec_stream.h) pumped between it and the tunnel's gRPC stream
// (common/exec/attached_command.h), or, for a backend that runs the command itself
// (Backend::RelayExec: nexec's agent does), passed through as it comes.

#include <functional>
#include <memory>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "adapters/sdk/backend.h"
#include "common/exec/attached_command.h"

namespace jc::adapter {

using exec_stream::AttachedCommand;

// Starts `plan`; `rows` and `cols` size its terminal (0: 24x80). FailedPrecondition when
// the program cannot be run, saying why.
absl::StatusOr<AttachedCommand> StartAttached(const ExecPlan& plan, bool tty, int rows, int cols);

// Says the command started (a frame with `connected`), then pumps the exec stream both ways
// and sends its exit status last (exec_stream::PumpAttached). The command is ended when its
// caller goes, or once `replica_running` (asked every second) says its replica no longer
// runs.
void PumpExec(AttachedCommand command, grpc::ServerContext* ctx,
              grpc::ServerReaderWriter<::jointcloud::adapter::v1::TunnelFrame,
                                       ::jointcloud::adapter::v1::TunnelFrame>* stream,
              const std::function<bool()>& replica_running);

// Passes the exec stream between the tunnel and `relay` (opened) until the command's side
// ends; the caller going cancels the relay. Sends `connected` first and `close` last.
void PumpRelay(ExecRelay& relay, grpc::ServerContext* ctx,
               grpc::ServerReaderWriter<::jointcloud::adapter::v1::TunnelFrame,
                                        ::jointcloud::adapter::v1::TunnelFrame>* stream);

}  // namespace jc::adapter
