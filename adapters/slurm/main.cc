// jc-adapter-slurm: connects a center run by Slurm to Jointcloud, through Slurm's
// command-line tools (sbatch, squeue, scancel, sinfo, sacct).
#include <cstdlib>

#include "absl/flags/flag.h"
#include "adapters/sdk/run_adapter.h"
#include "adapters/slurm/slurm_backend.h"

ABSL_FLAG(std::string, slurm_conf, "", "slurm.conf of the cluster (default: $SLURM_CONF, then Slurm's own)");
ABSL_FLAG(std::string, log_dir, "",
          "where replicas' output goes, on a file system the nodes and the adapter share "
          "(default: <state_dir>/slurm-output)");
ABSL_FLAG(std::string, partition, "", "Slurm partition for Jointcloud's replicas (default: the cluster's)");
ABSL_FLAG(std::string, account, "", "Slurm account to charge (default: the user's)");

int main(int argc, char** argv) {
  auto options = jc::adapter::ParseAdapterFlags(
      argc, argv, "jc-adapter-slurm --center_config=center.yaml --log_dir=/shared/jointcloud/output");
  if (!absl::GetFlag(FLAGS_slurm_conf).empty()) setenv("SLURM_CONF", absl::GetFlag(FLAGS_slurm_conf).c_str(), 1);
  jc::adapter::SlurmOptions slurm;
  slurm.log_dir = absl::GetFlag(FLAGS_log_dir).empty() ? options.state_dir + "/slurm-output"
                                                       : absl::GetFlag(FLAGS_log_dir);
  slurm.partition = absl::GetFlag(FLAGS_partition);
  slurm.account = absl::GetFlag(FLAGS_account);
  jc::adapter::SlurmBackend backend(slurm);
  return jc::adapter::RunAdapter(backend, options);
}
