#pragma once

// An interactive job's session for `nexec submit -I` and `-Ip` (SPEC B6, LSF's bsub -I):
// waits for the job to be dispatched, copies this process's stdin to the job's command
// and the command's output here, all through the master and the job's agent, and
// answers the job's exit code.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/strings/string_view.h"
#include "executor/cli/follow_log.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {

// Runs the session of job `job_id`. With `tty` the job runs on a pseudo-terminal: when
// stdin is a terminal it goes raw, so keys (^C included) reach the job's terminal as
// typed, and the job's terminal size follows this one's (SIGWINCH). Without, ^C here is
// sent to the job as SIGINT. ^C while the job still waits kills it. Returns the job's
// exit code (130 when it was killed waiting).
int RunInteractive(::nexec::v1::Master::Stub* stub, const ContextFactory& ctx, int64_t job_id, bool tty);

}  // namespace jc::nexec
