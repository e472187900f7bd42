// jc-adapter-native: connects a center run by the bundled executor (nexec) to Jointcloud.
#include "absl/flags/flag.h"
#include "adapters/native/nexec_backend.h"
#include "adapters/sdk/run_adapter.h"

ABSL_FLAG(std::string, nexec_master, "127.0.0.1:6800", "gRPC address of nexec-master");
ABSL_FLAG(std::string, queue, "", "nexec queue for Jointcloud's replicas (default: the master's)");

int main(int argc, char** argv) {
  auto options = jc::adapter::ParseAdapterFlags(
      argc, argv, "jc-adapter-native --center_config=center.yaml --nexec_master=127.0.0.1:6800");
  jc::adapter::NexecBackend backend(absl::GetFlag(FLAGS_nexec_master), absl::GetFlag(FLAGS_queue));
  return jc::adapter::RunAdapter(backend, options);
}
