// libFuzzer harness: a CDI spec (JSON or YAML, as `nvidia-ctk cdi generate` writes it to
// /etc/cdi or /var/run/cdi) read by the GPU container edits of the agent and the Slurm
// adapter's image runs (executor/container/gpu_container_edits.h). The spec is read from a
// directory, so each input is written to a file of a scratch directory first and given to
// the public GpuContainerSetup::Load; then the edits for some GPUs are asked for. It must
// be an error or edits, never a crash or an exception.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "executor/container/gpu_container_edits.h"

namespace {

char scratch[] = "/tmp/jc-cdi-fuzz.XXXXXX";

void RemoveScratch() {
  unlink((std::string(scratch) + "/nvidia.yaml").c_str());
  rmdir(scratch);
}

const std::string& ScratchDir() {
  static const std::string dir = [] {
    if (mkdtemp(scratch) == nullptr) abort();
    atexit(RemoveScratch);
    return std::string(scratch);
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = ScratchDir();
  // JSON and YAML alike (JSON is YAML); the name only has to end in .yaml or .json.
  {
    std::ofstream out(dir + "/nvidia.yaml", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto setup = jc::nexec::GpuContainerSetup::Load({dir}, "", "/dev/nvidia{index}");
  if (!setup.ok()) return 0;
  (void)setup->Describe();
  for (const std::vector<int>& gpus : {std::vector<int>{}, std::vector<int>{0}, std::vector<int>{0, 1, 7}}) {
    auto edits = setup->For(gpus);
    if (!edits.ok()) continue;
    std::vector<std::string> env = {"PATH=/usr/bin", "LD_LIBRARY_PATH=", "HOME=/root"};
    jc::nexec::ApplyEnv(edits->env, &env);
  }
  return 0;
}
