// nexec-agent: runs on every host; reports it to the master and runs its tasks.

#include <prometheus/registry.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/admin_server.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/version.h"
#include "executor/agent/agent.h"
#include "executor/agent/vfork_child.h"

ABSL_FLAG(std::string, master, "127.0.0.1:6800", "the master's address");
ABSL_FLAG(std::string, host, "", "this host's name (default: the system host name)");
ABSL_FLAG(std::string, listen, "127.0.0.1:0", "gRPC address for the master's calls");
ABSL_FLAG(std::string, resources, "",
          "declared resources, e.g. cpus=64,gpus=8,mem=512G,model=A100 (the rest is measured)");
ABSL_FLAG(absl::Duration, heartbeat, absl::Seconds(1), "heartbeat interval");
ABSL_FLAG(std::string, sensor_dir, "",
          "directory with resource sensors (ress.host, ress.<host>) to run");
ABSL_FLAG(std::string, state_dir, "",
          "where the agent records its tasks' process groups, so that a restarted agent kills what a crashed "
          "one left running (default: <temp dir>/nexec-agent-<host>)");
ABSL_FLAG(std::string, gpu_device, "/dev/nvidia{index}",
          "the device node of GPU {index}; a task contained in a cgroup may open only those of the GPUs it holds");
ABSL_FLAG(std::string, image_store, "", "where images of tasks with --image are kept (default <state_dir>/images)");
ABSL_FLAG(int64_t, image_store_limit_mb, 0,
          "the most the image store may hold (MB): past it, the least recently used images no task runs in are "
          "removed; 0: no limit");
ABSL_FLAG(absl::Duration, image_pull_timeout, absl::Minutes(10),
          "a pull of a task's image that takes longer is stopped, and the task ends saying so");
ABSL_FLAG(uint32_t, image_unpack_uid, 2147483646,
          "the uid images are unpacked as (umoci --rootless), before their files are given to root: one no account "
          "has, which owns nothing and runs nothing on this host (images are refused when an account has it)");
ABSL_FLAG(std::string, registry_auth_file, "",
          "credentials for image registries, in Docker's config.json form ({\"auths\": {\"host:port\": {\"auth\": ...}}})");
ABSL_FLAG(std::string, registry_cert_dir, "", "a directory of CA certificates (*.crt) trusted for image registries");
ABSL_FLAG(std::vector<std::string>, cdi_spec_dirs, std::vector<std::string>({"/etc/cdi", "/var/run/cdi"}),
          "where to look for a CDI spec of kind nvidia.com/gpu (nvidia-ctk cdi generate): its edits give a task in "
          "its image the GPUs it holds with their driver");
ABSL_FLAG(std::string, gpu_driver_dir, "/usr/local/nvidia",
          "without a CDI spec: the driver's directory (bin/, lib/, lib64/), bound read-only at /usr/local/nvidia in "
          "a task's image when the task holds GPUs; \"\" for none");
ABSL_FLAG(std::string, nvidia_smi, "nvidia-smi",
          "nvidia-smi to ask for GPUs, their use and the processes on them (a path, or a name on $PATH)");
ABSL_FLAG(std::string, gpu_misuse, "kill",
          "a task's process on a GPU not given to its job: kill (the task) or report (in the job's history only)");
ABSL_FLAG(std::string, metrics_address, "",
          "where /metrics, /healthz and /readyz are served, e.g. 127.0.0.1:6802 (port 0: any free one; empty: "
          "nowhere)");
ABSL_FLAG(std::string, auth, "munge",
          "how calls are proven: munge, or none (development only: anyone reaching the port may launch)");
ABSL_FLAG(std::string, munge_socket, "", "munged's socket (default: $NEXEC_MUNGE_SOCKET, else munge's own)");
ABSL_FLAG(std::string, cgroups, "auto",
          "contain each task in a cgroup of its own (kill, suspend and memory limits reach every process it starts): "
          "auto (where the host allows), on (refuse to start without), off");
ABSL_FLAG(bool, direct_exec, true,
          "run a command without shell syntax (`sleep 60`, `/opt/app/train --epochs=3`) as its program, with no "
          "/bin/sh between, when it is a system program (root's, in root's directories); false: every command "
          "through /bin/sh -c");
ABSL_FLAG(bool, master_stream, true,
          "send heartbeats and take launches on one stream held open with the leading master (issue 48); false, or "
          "a master that serves none: a call each");
ABSL_FLAG(absl::Duration, task_start_timeout, absl::Seconds(10),
          "a task's process that has not started its command this long after it was made (its working directory or "
          "output on a file system that does not answer) is killed and the job fails to start: it holds the thread "
          "that starts every task; one stopped before its command starts is killed at once");
ABSL_FLAG(int64_t, master_uid, -1,
          "the account the master runs as; launches from others are refused (default: the agent's own "
          "account; root is always accepted)");

int main(int argc, char** argv) {
  jc::daemon::Begin("nexec-agent", "nexec-agent --master=host:6800 [--host=name] [--resources=cpus=64,gpus=8,mem=512G]",
                    argc, argv);
  jc::nexec::AgentOptions options;
  options.master_address = absl::GetFlag(FLAGS_master);
  options.host = absl::GetFlag(FLAGS_host);
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.declared = absl::GetFlag(FLAGS_resources);
  options.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat);
  options.direct_exec = absl::GetFlag(FLAGS_direct_exec);
  options.master_stream = absl::GetFlag(FLAGS_master_stream);
  options.sensor_dir = absl::GetFlag(FLAGS_sensor_dir);
  options.state_dir = absl::GetFlag(FLAGS_state_dir);
  options.nvidia_smi = absl::GetFlag(FLAGS_nvidia_smi);
  options.gpu_device = absl::GetFlag(FLAGS_gpu_device);
  options.image_store = absl::GetFlag(FLAGS_image_store);
  options.image_store_limit_mb = absl::GetFlag(FLAGS_image_store_limit_mb);
  if (options.image_store_limit_mb < 0) {
    std::fprintf(stderr, "nexec-agent: --image_store_limit_mb must be 0 (no limit) or more\n");
    return 1;
  }
  options.registry_auth_file = absl::GetFlag(FLAGS_registry_auth_file);
  options.registry_cert_dir = absl::GetFlag(FLAGS_registry_cert_dir);
  options.image_pull_timeout = absl::GetFlag(FLAGS_image_pull_timeout);
  if (options.image_pull_timeout < absl::Seconds(1)) {
    std::fprintf(stderr, "nexec-agent: --image_pull_timeout must be at least 1s\n");
    return 2;
  }
  options.image_unpack_uid = absl::GetFlag(FLAGS_image_unpack_uid);
  options.cdi_spec_dirs = absl::GetFlag(FLAGS_cdi_spec_dirs);
  options.gpu_driver_dir = absl::GetFlag(FLAGS_gpu_driver_dir);
  if (!absl::StrContains(options.gpu_device, "{index}")) {
    std::fprintf(stderr, "nexec-agent: --gpu_device must contain {index} (e.g. /dev/nvidia{index})\n");
    return 1;
  }
  if (std::string misuse = absl::GetFlag(FLAGS_gpu_misuse); misuse == "kill" || misuse == "report") {
    options.kill_gpu_misuse = misuse == "kill";
  } else {
    spdlog::error("--gpu_misuse={}: expected kill or report", misuse);
    return 2;
  }
  auto auth = jc::nexec::MungeAuthFromFlags(absl::GetFlag(FLAGS_auth), absl::GetFlag(FLAGS_munge_socket));
  if (!auth.ok()) {
    spdlog::error("{}", auth.status().message());
    return 2;
  }
  if (!auth->enabled()) spdlog::warn("--auth=none: anyone who reaches this agent may launch processes; for development only");
  options.auth = *auth;
  options.cgroups = absl::GetFlag(FLAGS_cgroups);
  if (absl::Duration start = absl::GetFlag(FLAGS_task_start_timeout); start >= absl::Milliseconds(100)) {
    jc::nexec::SetPreExecLimit(absl::ToChronoMilliseconds(start));
  } else {
    std::fprintf(stderr, "nexec-agent: --task_start_timeout must be at least 100ms\n");
    return 2;
  }
  options.master_uid = absl::GetFlag(FLAGS_master_uid) >= 0 ? static_cast<uid_t>(absl::GetFlag(FLAGS_master_uid))
                                                            : geteuid();
  jc::nexec::Agent agent(options);
  auto registry = std::make_shared<prometheus::Registry>();
  agent.EnableMetrics(*registry);
  auto port = agent.Start();
  if (!port.ok()) {
    spdlog::error("{}", port.status().message());
    return 1;
  }
  auto admin = jc::daemon::ServeAdmin("nexec agent", absl::GetFlag(FLAGS_metrics_address), registry,
                                      [&agent] { return agent.Ready(); });
  if (!admin.ok()) {
    spdlog::error("{}", admin.status().message());
    return 1;
  }
  jc::daemon::WaitForStop("nexec agent");  // running tasks are killed
  if (*admin) (*admin)->Stop();
  agent.Stop();
  return 0;
}
