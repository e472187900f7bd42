#pragma once

// What a task in its image needs to use the GPUs it holds (issue 30 item 3), beyond their
// device nodes: the driver's control nodes (/dev/nvidiactl, /dev/nvidia-uvm, ...) and its
// user-space half (libcuda, libnvidia-ml, nvidia-smi), which must match the host's kernel
// module and so never come from the image. Two sources, as container engines use them:
//   - a CDI spec (the Container Device Interface, github.com/cncf-tags/container-device-
//     interface; written by `nvidia-ctk cdi generate` to /etc/cdi or /var/run/cdi) of kind
//     nvidia.com/gpu: its common edits plus those of each held GPU's device, named by its
//     index ("0") as nvidia-ctk names them;
//   - else the driver's directory (the nvidia-docker convention, /usr/local/nvidia with
//     bin/, lib/ and lib64/), bound read-only at /usr/local/nvidia with its bin on PATH
//     and its libraries on LD_LIBRARY_PATH, plus the control nodes that exist.
// With neither, the container gets the device nodes alone (the image must then bring a
// driver library that matches the host's, which is rarely true); the agent says so at start.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace jc::nexec {

struct ContainerMount {
  std::string host_path;
  std::string container_path;
  std::vector<std::string> options;  // e.g. ro, nosuid, nodev, bind
};

struct ContainerDevice {
  std::string host_path;
  std::string container_path;
};

struct GpuContainerEdits {
  std::vector<ContainerDevice> device_nodes;
  std::vector<ContainerMount> mounts;
  std::vector<std::string> env;              // "K=V"; PATH and LD_LIBRARY_PATH are appended to
  std::map<std::string, nlohmann::json> hooks;  // OCI hook lists by name (createContainer, ...)
};

class GpuContainerSetup {
 public:
  // `cdi_dirs`: where CDI specs are looked for (the first nvidia.com/gpu spec found wins);
  // `driver_dir`: the driver's directory ("" for none); `gpu_device`: the node of GPU
  // {index} (the agent's --gpu_device). A CDI spec that cannot be read is an error.
  static absl::StatusOr<GpuContainerSetup> Load(const std::vector<std::string>& cdi_dirs,
                                                const std::string& driver_dir, const std::string& gpu_device);

  // The edits for a task holding `gpus` (none: no edits). A held GPU the CDI spec does not
  // name is an error that names both.
  absl::StatusOr<GpuContainerEdits> For(const std::vector<int>& gpus) const;

  // For the agent's log: "CDI spec /etc/cdi/nvidia.yaml", "driver /usr/local/nvidia" or
  // "device nodes only".
  std::string Describe() const;

 private:
  std::string cdi_path_;                    // "" without a CDI spec
  GpuContainerEdits cdi_common_;
  std::map<std::string, GpuContainerEdits> cdi_devices_;  // by device name
  std::string driver_dir_;
  std::string gpu_device_;
};

// Merges `edits` into a container's env ("K=V" list): variables the edits set replace the
// container's, except PATH and LD_LIBRARY_PATH, which are extended.
void ApplyEnv(const std::vector<std::string>& edits, std::vector<std::string>* env);

}  // namespace jc::nexec
