#pragma once

// The one interface a center owner implements to connect a local scheduler to Jointcloud
// (SPEC A14). The SDK (RunAdapter) does everything else: the gRPC server, validation,
// idempotent submits, the persisted event stream with cursors, health and /metrics.
//
// A backend only talks to its scheduler. Every call may come from any thread; calls for
// different replicas may run at the same time.

#include <optional>

#include "absl/time/time.h"
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jointcloud/adapter/v1/adapter.pb.h"

namespace jc::adapter {

namespace pb = ::jointcloud::adapter::v1;

// "jc-<job>-<task>-<replica>-<attempt>": the name the center's scheduler knows a replica
// attempt by. Backends use it as the job name, so a repeated submit can find it.
std::string ReplicaName(const pb::ReplicaKey& key);

// One replica attempt to start, already validated by the SDK.
struct ReplicaLaunch {
  std::string name;  // ReplicaName(key)
  pb::ReplicaKey key;
  std::string command;  // for /bin/sh -c
  std::string user;     // the account to run as (the adapter's default when none was asked)
  std::string project;  // the federation project the job belongs to (center limits may count it)
  std::string image_id;
  // The staged copy of the image this replica runs (image_dir/.projects/<project>/<id>, its
  // project's, else image_dir/<id>, the federation's), chosen by the SDK; "" when the image
  // was not staged here (configured `images:` or none). A backend that runs staged copies
  // runs this one, never image_dir/<image_id> by itself: ids are unique only per project.
  std::string image_path;
  std::string image;  // its content, registry/repository@sha256:...; empty: on the host
  // The task's datasets on the center's file system: bound read-only into its image (the
  // replica's JC_DATASETS says where each is).
  std::vector<std::string> read_only_dirs;
  std::map<std::string, std::string> env;
  pb::SpecOffer spec;  // the resource spec, with its quantities
  // The longest it may run (SubmitReplicaRequest.time_limit_seconds, else the adapter's
  // --default_time_limit); zero: no limit. A scheduler that plans by time limits (Slurm's
  // --time, nexec's -W) is given it, so it can say when waiting replicas will start.
  absl::Duration time_limit = absl::ZeroDuration();
  std::string spec_digest;  // of what the submit asked for (see Replica.spec_digest)
  // Its ports (SPEC A17), given by the SDK from the center's range (each also in env as
  // JC_PORT_<NAME>): the replica listens on them on whichever host runs it.
  struct Port {
    std::string name;
    int port = 0;
    std::string readiness_path;
  };
  std::vector<Port> ports;
};

// What the scheduler says about a replica now.
struct ReplicaObservation {
  pb::ReplicaState state = pb::REPLICA_PENDING;
  int exit_code = 0;
  std::string message;
  // Once it ended, where the backend measures them: what it used (issue 31), and when it
  // started and ended by the center's clock (else the adapter's poll times stand).
  std::optional<pb::ReplicaUsage> usage;
  std::optional<absl::Time> started_at, ended_at;
  // The host it runs on, as the adapter reaches it (its ports are there); empty: the
  // center configuration's endpoint_host.
  std::string host;
};

// A command to run in a running replica (SPEC A17, `jcctl job exec`; TunnelFrame.exec).
struct ExecRequest {
  std::string external_id;            // the replica's, as Submit returned it
  pb::ReplicaKey key;
  std::string account;                // the account the replica runs as (ReplicaLaunch.user)
  std::vector<std::string> command;   // argv, never through a shell of the adapter's
  bool tty = false;                   // on a pseudo-terminal the SDK makes
  int rows = 0, cols = 0;             // the terminal's first size; 0: 24x80
};

// How the backend runs it: a program the SDK starts on the adapter's host, without a
// shell, attached to the caller's stream (its stdin, stdout and stderr, or a terminal),
// whose exit status is the command's. It must put the command in the replica, as the
// replica's account: in its image when it runs in one (runc exec), on its host within its
// allocation (Slurm's `srun --jobid --overlap`), never on the adapter's host as the
// adapter's account.
struct ExecPlan {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env`
  std::vector<std::string> env;   // the whole environment, "K=V"
  std::string cwd = "/";
};

// A command's exec stream (common/exec/exec_stream.h) when the backend's scheduler runs the
// command itself (Backend::RelayExec). Write and Read may be called from two threads at once.
class ExecRelay {
 public:
  virtual ~ExecRelay() = default;
  // Exec-stream bytes toward the command; false once its side is gone.
  virtual bool Write(const std::string& bytes) = 0;
  // The command's next exec-stream bytes; false once its side ended.
  virtual bool Read(std::string* bytes) = 0;
  // Ends the command (its caller went); Read then ends. From any thread.
  virtual void Cancel() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The scheduler's name ("slurm") and the center's whole capacity (standard Table 2).
  // Specs, power, network and security figures come from the center configuration.
  virtual absl::StatusOr<pb::CenterInfo> Describe() = 0;

  // Standard Table 4: tasks running and waiting, resources used and free.
  virtual absl::StatusOr<pb::Usage> GetUsage() = 0;

  // What the center's scheduler knows of its queue (SPEC A16): for each of `specs` (the
  // center's offers), how long a replica of it submitted now would wait before it starts,
  // by the scheduler's own plan (backfill reservations, `squeue --start`). Leave out a spec
  // whose wait the scheduler does not know: absent means unknown, never "no wait". An
  // error leaves every spec unknown; the usage is reported all the same. The default
  // knows nothing.
  virtual absl::StatusOr<std::vector<pb::SpecStartEstimate>> StartEstimates(
      const std::vector<pb::SpecOffer>& specs) {
    return std::vector<pb::SpecStartEstimate>{};
  }

  // Starts the replica, or, when the scheduler already has one named `launch.name`
  // (the adapter crashed after submitting), returns that one. Returns the scheduler's
  // id for it. InvalidArgument/FailedPrecondition when the scheduler refuses it.
  virtual absl::StatusOr<std::string> Submit(const ReplicaLaunch& launch) = 0;

  // Starts each of `launches` as Submit would, each taken or refused on its own (a replica
  // the scheduler already has answered with its id): their ids or refusals, in order. The
  // default submits them one after another; a scheduler that takes many in one request
  // (nexec's job packs) answers them with one.
  virtual std::vector<absl::StatusOr<std::string>> SubmitEach(const std::vector<ReplicaLaunch>& launches) {
    std::vector<absl::StatusOr<std::string>> out;
    out.reserve(launches.size());
    for (const ReplicaLaunch& launch : launches) out.push_back(Submit(launch));
    return out;
  }

  // Starts every replica together or none (gang). Returns their ids in order.
  virtual absl::StatusOr<std::vector<std::string>> SubmitGang(
      const std::vector<ReplicaLaunch>& launches) {
    return absl::UnimplementedError("this center's scheduler cannot start replicas as a gang");
  }

  // Whether this center runs a replica in its image (SubmitReplicaRequest.image); one
  // that does not refuses replicas that name one, rather than running them bare.
  virtual bool RunsImages() const { return false; }

  // Stops a replica (no error if it already ended).
  virtual absl::Status Stop(const std::string& external_id) = 0;

  // Takes back a replica that has not started (SPEC A16: the control plane moves it to
  // another center): true when it was cancelled before it started, and the scheduler will
  // never start it; false when it started (it is left running). The check and the cancel
  // must be one step of the scheduler (nexec's Kill only_if_pending, Slurm's `scancel
  // --state=PENDING`): a replica is never both withdrawn and started. Replicas of one gang
  // share the scheduler's job and go together. The default: this center cannot, and the
  // control plane never moves its replicas.
  virtual absl::StatusOr<bool> Withdraw(const std::string& external_id) {
    return absl::UnimplementedError("this center's scheduler cannot withdraw a replica that waits");
  }

  // The state of each replica asked for, by external id. A replica missing from the
  // answer is unknown to the scheduler (the SDK reports it failed as lost).
  virtual absl::StatusOr<std::map<std::string, ReplicaObservation>> Poll(
      const std::vector<std::string>& external_ids) = 0;

  // How to run `request.command` in the running replica (above). The default: this
  // center cannot, and `jcctl job exec` says so (Unimplemented).
  virtual absl::StatusOr<ExecPlan> PlanExec(const ExecRequest& request) {
    return absl::UnimplementedError("this center's scheduler cannot run a command in a running replica");
  }

  // For a backend whose scheduler runs the command itself and speaks the exec stream
  // (nexec's agents do): the command started in the running replica, its stream open.
  // The SDK then passes bytes between it and the caller and never starts a process for it.
  // The default: Unimplemented, and PlanExec says how the adapter starts the command.
  virtual absl::StatusOr<std::unique_ptr<ExecRelay>> RelayExec(const ExecRequest& request) {
    return absl::UnimplementedError("this backend runs no command itself");
  }

  // Up to `max_bytes` of the replica's stdout (or stderr) from `offset`; empty at the end.
  virtual absl::StatusOr<std::string> ReadLog(const std::string& external_id, bool stderr,
                                              int64_t offset, int64_t max_bytes) = 0;
};

}  // namespace jc::adapter
