#include "executor/container/gpu_container_edits.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace jc::nexec {
namespace {

// The driver's nodes every CUDA or NVML program opens besides its GPUs' own.
constexpr const char* kControlNodes[] = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                         "/dev/nvidia-modeset"};

bool IsCharDevice(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

std::vector<std::string> Strings(const YAML::Node& node) {
  std::vector<std::string> out;
  if (node && node.IsSequence()) {
    for (const auto& item : node) out.push_back(item.as<std::string>());
  }
  return out;
}

// A CDI containerEdits object (the spec's own, or a device's).
GpuContainerEdits ParseEdits(const YAML::Node& edits) {
  GpuContainerEdits out;
  if (!edits) return out;
  out.env = Strings(edits["env"]);
  for (const auto& node : edits["deviceNodes"]) {
    ContainerDevice d;
    d.container_path = node["path"].as<std::string>();
    d.host_path = node["hostPath"] ? node["hostPath"].as<std::string>() : d.container_path;
    out.device_nodes.push_back(std::move(d));
  }
  for (const auto& node : edits["mounts"]) {
    ContainerMount m;
    m.host_path = node["hostPath"].as<std::string>();
    m.container_path = node["containerPath"].as<std::string>();
    m.options = Strings(node["options"]);
    out.mounts.push_back(std::move(m));
  }
  for (const auto& node : edits["hooks"]) {
    nlohmann::json hook = {{"path", node["path"].as<std::string>()}};
    if (node["args"]) hook["args"] = Strings(node["args"]);
    if (node["env"]) hook["env"] = Strings(node["env"]);
    if (node["timeout"]) hook["timeout"] = node["timeout"].as<int>();
    out.hooks[node["hookName"].as<std::string>()].push_back(std::move(hook));
  }
  return out;
}

void Append(const GpuContainerEdits& from, GpuContainerEdits* to) {
  to->device_nodes.insert(to->device_nodes.end(), from.device_nodes.begin(), from.device_nodes.end());
  to->mounts.insert(to->mounts.end(), from.mounts.begin(), from.mounts.end());
  to->env.insert(to->env.end(), from.env.begin(), from.env.end());
  for (const auto& [name, list] : from.hooks) {
    for (const auto& hook : list) to->hooks[name].push_back(hook);
  }
}

}  // namespace

absl::StatusOr<GpuContainerSetup> GpuContainerSetup::Load(const std::vector<std::string>& cdi_dirs,
                                                          const std::string& driver_dir,
                                                          const std::string& gpu_device) {
  GpuContainerSetup setup;
  setup.gpu_device_ = gpu_device;
  for (const std::string& dir : cdi_dirs) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string ext = entry.path().extension().string();
      if (ext == ".yaml" || ext == ".json") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      YAML::Node spec;
      try {
        spec = YAML::LoadFile(file.string());  // JSON is YAML
        if (spec["kind"].as<std::string>("") != "nvidia.com/gpu") continue;
        setup.cdi_common_ = ParseEdits(spec["containerEdits"]);
        for (const auto& device : spec["devices"]) {
          setup.cdi_devices_[device["name"].as<std::string>()] = ParseEdits(device["containerEdits"]);
        }
      } catch (const YAML::Exception& e) {
        return absl::InvalidArgumentError(absl::StrCat("CDI spec ", file.string(), ": ", e.what()));
      }
      setup.cdi_path_ = file.string();
      return setup;
    }
  }
  if (!driver_dir.empty() && std::filesystem::is_directory(driver_dir)) setup.driver_dir_ = driver_dir;
  return setup;
}

absl::StatusOr<GpuContainerEdits> GpuContainerSetup::For(const std::vector<int>& gpus) const {
  GpuContainerEdits edits;
  if (gpus.empty()) return edits;
  if (!cdi_path_.empty()) {
    Append(cdi_common_, &edits);
    for (int gpu : gpus) {
      auto device = cdi_devices_.find(absl::StrCat(gpu));
      if (device == cdi_devices_.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("the task holds GPU ", gpu, " but the CDI spec ", cdi_path_, " names no device \"", gpu, "\""));
      }
      Append(device->second, &edits);
    }
    return edits;
  }
  for (int gpu : gpus) {
    const std::string node = absl::StrReplaceAll(gpu_device_, {{"{index}", absl::StrCat(gpu)}});
    // Device nodes belong in the container's /dev (a tmpfs): one kept elsewhere on the host
    // goes there by its name, never into the image's read-only files.
    const std::string inside =
        node.rfind("/dev/", 0) == 0 ? node : "/dev/" + std::filesystem::path(node).filename().string();
    edits.device_nodes.push_back({node, inside});
  }
  for (const char* node : kControlNodes) {
    if (IsCharDevice(node)) edits.device_nodes.push_back({node, node});
  }
  if (!driver_dir_.empty()) {
    const std::string inside = "/usr/local/nvidia";
    edits.mounts.push_back({driver_dir_, inside, {"rbind", "ro", "nosuid", "nodev"}});
    edits.env.push_back("PATH=" + inside + "/bin");
    edits.env.push_back("LD_LIBRARY_PATH=" + inside + "/lib64:" + inside + "/lib");
  }
  return edits;
}

std::string GpuContainerSetup::Describe() const {
  if (!cdi_path_.empty()) return "CDI spec " + cdi_path_;
  if (!driver_dir_.empty()) return "driver " + driver_dir_;
  return "device nodes only";
}

void ApplyEnv(const std::vector<std::string>& edits, std::vector<std::string>* env) {
  for (const std::string& kv : edits) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = kv.substr(0, eq + 1);
    auto it = std::find_if(env->begin(), env->end(), [&](const std::string& e) { return e.rfind(key, 0) == 0; });
    if (it == env->end()) {
      env->push_back(kv);
    } else if (key == "PATH=") {
      *it += ":" + kv.substr(eq + 1);
    } else if (key == "LD_LIBRARY_PATH=") {
      *it = kv + (it->size() > key.size() ? ":" + it->substr(key.size()) : "");
    } else {
      *it = kv;
    }
  }
}

}  // namespace jc::nexec
