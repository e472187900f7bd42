// jc-adapter-local: the example adapter of the SDK; runs replicas as local processes.
#include <thread>

#include "absl/flags/flag.h"
#include "adapters/example/local_backend.h"
#include "adapters/sdk/run_adapter.h"

ABSL_FLAG(std::string, work_dir, "./local-replicas", "where replicas run and keep their output");
ABSL_FLAG(int, cpus, 0, "CPUs offered (default: this machine's)");
ABSL_FLAG(int, memory_mb, 4096, "memory offered, MB");

int main(int argc, char** argv) {
  auto options = jc::adapter::ParseAdapterFlags(
      argc, argv, "jc-adapter-local --center_config=center.yaml [--listen=127.0.0.1:7100]");
  int cpus = absl::GetFlag(FLAGS_cpus) > 0 ? absl::GetFlag(FLAGS_cpus)
                                           : static_cast<int>(std::thread::hardware_concurrency());
  jc::adapter::LocalBackend backend(absl::GetFlag(FLAGS_work_dir), cpus, absl::GetFlag(FLAGS_memory_mb));
  return jc::adapter::RunAdapter(backend, options);
}
