// jc-adapter-slurm: connects a center run by Slurm to Jointcloud, through Slurm's
// command-line tools (sbatch, squeue, scancel, sinfo, sacct).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/flags/flag.h"
#include "adapters/sdk/run_adapter.h"
#include "adapters/slurm/slurm_backend.h"

ABSL_FLAG(std::string, slurm_conf, "", "slurm.conf of the cluster (default: $SLURM_CONF, then Slurm's own)");
ABSL_FLAG(std::string, log_dir, "",
          "where replicas' output goes, on a file system the nodes and the adapter share "
          "(default: <state_dir>/slurm-output)");
ABSL_FLAG(std::string, partition, "", "Slurm partition for Jointcloud's replicas (default: the cluster's)");
ABSL_FLAG(std::string, account, "", "Slurm account to charge (default: the user's)");
ABSL_FLAG(std::string, image_runner, "",
          "nexec-image-run on the nodes, which runs a replica in its image (default: the one beside this binary, when "
          "runc, skopeo and umoci are installed here too; \"none\": replicas whose image has content are refused)");
ABSL_FLAG(std::string, image_store, "/var/tmp/jointcloud-images-%u",
          "each account's image store on the nodes (%u: its uid); must be the account's own");
ABSL_FLAG(std::string, registry_auth_file, "",
          "credentials for image registries (Docker's config.json form), readable by the accounts replicas run as");
ABSL_FLAG(std::string, registry_cert_dir, "", "CA certificates (*.crt) trusted for image registries, on the nodes");
ABSL_FLAG(std::vector<std::string>, cdi_spec_dirs, std::vector<std::string>({"/etc/cdi", "/var/run/cdi"}),
          "where the nodes keep a CDI spec of kind nvidia.com/gpu: its mounts give a GPU job in its image the driver");
ABSL_FLAG(std::string, gpu_driver_dir, "/usr/local/nvidia",
          "without a CDI spec: the nodes' driver directory (bin/, lib64/), bound read-only into GPU jobs' images");
ABSL_FLAG(absl::Duration, image_pull_timeout, absl::Minutes(10),
          "a pull of a replica's image that takes longer is stopped, and the replica fails saying so");

int main(int argc, char** argv) {
  auto options = jc::adapter::ParseAdapterFlags(
      argc, argv, "jc-adapter-slurm --center_config=center.yaml --log_dir=/shared/jointcloud/output");
  if (!absl::GetFlag(FLAGS_slurm_conf).empty()) setenv("SLURM_CONF", absl::GetFlag(FLAGS_slurm_conf).c_str(), 1);
  jc::adapter::SlurmOptions slurm;
  slurm.log_dir = absl::GetFlag(FLAGS_log_dir).empty() ? options.state_dir + "/slurm-output"
                                                       : absl::GetFlag(FLAGS_log_dir);
  slurm.partition = absl::GetFlag(FLAGS_partition);
  slurm.account = absl::GetFlag(FLAGS_account);
  slurm.image_runner = absl::GetFlag(FLAGS_image_runner);
  if (slurm.image_runner.empty()) {
    // Beside this binary, where the build and the packages put it; only with the tools it
    // runs (the nodes are taken to have what the adapter's host has).
    std::error_code ec;
    const auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "nexec-image-run";
    bool tools = true;
    for (const char* tool : {"/usr/bin/runc", "/usr/bin/skopeo", "/usr/bin/umoci"}) tools &= access(tool, X_OK) == 0;
    const auto helper = beside.parent_path() / "nexec-userns-exec";
    if (!ec && tools && access(beside.c_str(), X_OK) == 0 && access(helper.c_str(), X_OK) == 0) {
      slurm.image_runner = beside.string();
      slurm.userns_helper = helper.string();
    }
  } else if (slurm.image_runner == "none") {
    slurm.image_runner.clear();
  }
  if (!slurm.image_runner.empty() && slurm.userns_helper.empty()) {
    slurm.userns_helper = (std::filesystem::path(slurm.image_runner).parent_path() / "nexec-userns-exec").string();
  }
  slurm.image_store = absl::GetFlag(FLAGS_image_store);
  slurm.cdi_spec_dirs = absl::GetFlag(FLAGS_cdi_spec_dirs);
  slurm.gpu_driver_dir = absl::GetFlag(FLAGS_gpu_driver_dir);
  slurm.registry_auth_file = absl::GetFlag(FLAGS_registry_auth_file);
  slurm.registry_cert_dir = absl::GetFlag(FLAGS_registry_cert_dir);
  slurm.image_pull_timeout_s = std::max<int64_t>(1, absl::ToInt64Seconds(absl::GetFlag(FLAGS_image_pull_timeout)));
  jc::adapter::SlurmBackend backend(slurm);
  return jc::adapter::RunAdapter(backend, options);
}
