#pragma once

// The adapter's end of `jcctl job exec` (SPEC A17; TunnelFrame.exec): the backend's plan
// (backend.h ExecPlan) started on pipes or a pseudo-terminal, and the exec stream
// (common/exec/exec_stream.h) pumped between it and the tunnel's gRPC stream until the
// command exits and its output is out, or the caller goes (the command's process group is
// then ended: SIGHUP and SIGTERM, SIGKILL 5 s later).

#include <sys/types.h>

#include <functional>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "adapters/sdk/backend.h"

namespace jc::adapter {

// A started command: its pid (the leader of a session and process group of its own) and
// the adapter's ends of its standard streams. With a terminal, `input` and `output` are the
// same fd (the terminal's master side) and `errors` is -1.
struct AttachedCommand {
  pid_t pid = -1;
  int input = -1;
  int output = -1;
  int errors = -1;
  bool tty = false;
};

// Starts `plan` (argv[0] looked up in the plan's PATH); `rows` and `cols` size its terminal
// (0: 24x80). FailedPrecondition when the program cannot be run, saying why.
absl::StatusOr<AttachedCommand> StartAttached(const ExecPlan& plan, bool tty, int rows, int cols);

// Says the command started (a frame with `connected`), then pumps the exec stream both ways
// and sends its exit status last. Returns once the command ended (or was ended) and every
// fd is closed. The command is ended when its caller goes, or once `replica_running`
// (asked every second) says its replica no longer runs; when it exits, whatever it left in
// its process group is killed.
void PumpExec(AttachedCommand command, grpc::ServerContext* ctx,
              grpc::ServerReaderWriter<::jointcloud::adapter::v1::TunnelFrame,
                                       ::jointcloud::adapter::v1::TunnelFrame>* stream,
              const std::function<bool()>& replica_running);

}  // namespace jc::adapter
