#pragma once

// The Slurm adapter's backend: a Slurm cluster driven through its command-line tools
// (sbatch, squeue, scancel, sinfo; sacct when accounting is on). Why the CLI and not
// slurmrestd: docs/adr/0006-slurm-adapter-uses-the-cli.md.
//
// A replica is one batch job named after the replica (so a repeated submit finds it), with
// --no-requeue (a new attempt is the control plane's decision, not Slurm's). Its output
// goes to <log_dir>/<job id>.out and .err, which the adapter must be able to read: on a
// real cluster, a directory on the shared file system.

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "absl/time/time.h"
#include "adapters/sdk/backend.h"
#include "adapters/slurm/slurm_output.h"  // the parsers of squeue, sacct and sinfo output

namespace jc::adapter {

struct SlurmOptions {
  std::string log_dir;    // batch scripts and replica output; shared with the nodes
  std::string partition;  // empty: the cluster's default partition
  std::string account;    // empty: the submitting user's default account
  absl::Duration command_timeout = absl::Seconds(30);
  // The adapter's secret for tagging its jobs (created 0600 on first use; must belong to
  // the adapter's account and be readable by it alone). Empty: <log_dir>/.jc-replica-tag.key.
  std::string tag_key_file;
  // Replicas in their images (issue 30 item 4): the batch script pulls the image by digest
  // into the account's store on the node and runs the command in it with runc, as the
  // account (rootless: a user namespace maps only it) or, for root, in a cgroup below the
  // job's. `image_runner`: nexec-image-run on the nodes (empty: the adapter runs no
  // images and refuses replicas whose image has content). `image_store`: each account's
  // store on the nodes, `%u` its uid (it must be the account's own: a directory another
  // account made is refused). Credentials and CAs must be readable by the accounts.
  std::string image_runner;
  std::string userns_helper;  // nexec-userns-exec on the nodes (for accounts other than root)
  std::string image_store = "/var/tmp/jointcloud-images-%u";
  std::string registry_auth_file;
  std::string registry_cert_dir;
  int64_t image_pull_timeout_s = 600;
  // GPUs in images (accounts other than root): the node's /dev is bound (Slurm's cgroup
  // confines the job to its GPUs) with the driver's user-space half: a CDI spec of kind
  // nvidia.com/gpu in these directories, else this directory (the nvidia-docker layout).
  std::vector<std::string> cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};
  std::string gpu_driver_dir = "/usr/local/nvidia";
};

// The part of a batch script that runs `command` in `image` (registry/repo@sha256:...) as
// `account` (uid, gid): the store checked, a bundle made, the job's environment (as Slurm
// set it on the node: SLURM_*, CUDA_VISIBLE_DEVICES, the replica's) handed in, and the
// runner's exit status returned (125: the image could not be pulled; the reason is on
// stderr). `cwd`: bound at its own path, the command's working directory.
absl::StatusOr<std::string> ImageScript(const SlurmOptions& options, const std::string& image,
                                        const std::string& command, uid_t uid, gid_t gid, const std::string& cwd,
                                        const std::vector<std::string>& read_only_dirs = {}, int gpus = 0);

// The tag the adapter puts in its jobs' comment ("jc:" + 32 hex digits): HMAC-SHA256 of the
// replica's name under the adapter's secret, so nobody else can make a job that passes for
// the replica, whatever name they give it.
std::string ReplicaTag(const std::string& secret, const std::string& name);

// sbatch's resource options for a spec: --cpus-per-task, --mem (MB), --gres.
std::vector<std::string> SbatchResourceArgs(const pb::SpecOffer& spec);
// sbatch's --time for a replica's time limit, in whole minutes rounded up; "" for none.
std::string SbatchTimeArg(absl::Duration limit);

class SlurmBackend final : public Backend {
 public:
  explicit SlurmBackend(SlurmOptions options);

  absl::StatusOr<pb::CenterInfo> Describe() override;
  absl::StatusOr<pb::Usage> GetUsage() override;
  // From Slurm's backfill plan: `squeue --start` (pending jobs' expected starts) and the
  // running jobs' time limits (SlurmStartWait); a spec Slurm says N/A for is left out.
  absl::StatusOr<std::vector<pb::SpecStartEstimate>> StartEstimates(
      const std::vector<pb::SpecOffer>& specs) override;
  absl::StatusOr<std::string> Submit(const ReplicaLaunch& launch) override;
  absl::Status Stop(const std::string& external_id) override;
  // `scancel --state=PENDING`: slurmctld cancels it only while it waits.
  absl::StatusOr<bool> Withdraw(const std::string& external_id) override;
  absl::StatusOr<std::map<std::string, ReplicaObservation>> Poll(
      const std::vector<std::string>& external_ids) override;
  absl::StatusOr<std::string> ReadLog(const std::string& external_id, bool stderr, int64_t offset,
                                      int64_t max_bytes) override;
  bool RunsImages() const override { return !options_.image_runner.empty(); }
  // `srun --jobid=ID --overlap [--pty]` into the replica's allocation, as its account (a step
  // beside the batch script, on its node, within its cgroup). A replica in its image: the
  // step enters its container (`runc exec` as root; rootless, nexec-userns-exec --enter).
  absl::StatusOr<ExecPlan> PlanExec(const ExecRequest& request) override;

 private:
  // Runs a Slurm client; a non-zero exit becomes an error carrying what it printed.
  absl::StatusOr<std::string> Slurm(const std::vector<std::string>& argv);
  absl::StatusOr<SlurmNodeTotals> Nodes();
  // The job the adapter submitted for `name`: the oldest with that name whose comment
  // carries the replica's tag ("" when none).
  absl::StatusOr<std::string> FindByName(const std::string& name);
  // The secret (read, or made on first use); an error when the file is not the adapter's alone.
  absl::StatusOr<std::string> TagSecret();
  std::string tag_secret_;
  // For jobs squeue no longer knows: sacct, when the cluster keeps accounting.
  void ObserveFromAccounting(const std::vector<std::string>& ids,
                             std::map<std::string, ReplicaObservation>* out);

  SlurmOptions options_;
  // The cluster keeps accounting (sacct answers); false once sacct said it is disabled.
  std::atomic<bool> accounting_{true};
};

}  // namespace jc::adapter
