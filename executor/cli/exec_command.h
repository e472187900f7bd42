#pragma once

// `nexec exec [-i] [-t] [--task N] ID -- COMMAND [ARG...]` (SPEC A17, as `kubectl exec` and
// Slurm's `srun --jobid --overlap --pty`): runs COMMAND in a running job's task, through
// the master and the task's agent, as the job's account, in its environment, directory
// and cgroup, or in its container when it runs in an image. Answers the command's exit
// status (exec_stream::RunExecClient).

#include <cstdint>
#include <string>
#include <vector>

#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {
class MungeAuth;

// Returns the exit status for nexec to exit with; a refusal or a broken stream prints
// "nexec: exec: ..." and answers 1.
int RunExec(::nexec::v1::Master::Stub* stub, const MungeAuth& auth, int64_t job_id, int32_t task_index,
            std::vector<std::string> command, bool input, bool tty);

}  // namespace jc::nexec
