// What a task in its image gets for the GPUs it holds (issue 30 item 3, SPEC B6): a CDI
// spec's edits (common + the held devices'), else the driver's directory and control nodes,
// and how they land in the bundle's config.json. /dev/null and /dev/zero stand for GPU
// nodes (any character device does); the real driver is tried by tests/gpu/gpu-check.sh.

#include "executor/container/gpu_container_edits.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "executor/container/container_bundle.h"

namespace fs = std::filesystem;
using jc::nexec::ApplyEnv;
using jc::nexec::ContainerConfig;
using jc::nexec::ContainerSpec;
using jc::nexec::GpuContainerSetup;

namespace {

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("jc-cdi-" + std::to_string(getpid()));
  TempDir() { fs::create_directories(dir); }
  ~TempDir() { fs::remove_all(dir); }
  void Write(const std::string& name, const std::string& text) const { std::ofstream(dir / name) << text; }
};

// As `nvidia-ctk cdi generate` writes it, shortened.
constexpr const char* kNvidiaSpec = R"(cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
      hostPath: /dev/null
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
    hostPath: /dev/zero
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-ctk
    args: [nvidia-ctk, hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.1
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.1
    options: [ro, nosuid, nodev, bind]
)";

}  // namespace

TEST_CASE("a CDI spec of kind nvidia.com/gpu gives a task its devices, the driver's files and hooks", "[B6]") {
  TempDir cdi;
  cdi.Write("other.yaml", "cdiVersion: 0.5.0\nkind: vendor.com/fpga\ndevices: []\n");
  cdi.Write("nvidia.yaml", kNvidiaSpec);
  auto setup = GpuContainerSetup::Load({"/nonexistent", cdi.dir.string()}, "/nonexistent", "/dev/nvidia{index}");
  REQUIRE(setup.ok());
  CHECK(setup->Describe() == "CDI spec " + (cdi.dir / "nvidia.yaml").string());

  auto none = setup->For({});
  REQUIRE(none.ok());
  CHECK(none->device_nodes.empty());
  CHECK(none->mounts.empty());

  auto edits = setup->For({0});
  REQUIRE(edits.ok());
  REQUIRE(edits->device_nodes.size() == 2);
  CHECK(edits->device_nodes[0].container_path == "/dev/nvidiactl");
  CHECK(edits->device_nodes[1].container_path == "/dev/nvidia0");
  CHECK(edits->device_nodes[1].host_path == "/dev/null");
  REQUIRE(edits->mounts.size() == 1);
  CHECK(edits->env == std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES=void"});
  REQUIRE(edits->hooks.count("createContainer") == 1);

  // A GPU the spec does not name is an error that says so, not a container without it.
  auto missing = setup->For({0, 1});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("names no device \"1\""));

  // In the bundle: the nodes (by the host node's numbers), allowed in the device cgroup,
  // the driver's file bound, the hook given to runc.
  ContainerSpec spec;
  spec.rootfs = "/images/x/rootfs";
  spec.command = "nvidia-smi";
  spec.gpu = *edits;
  auto config = ContainerConfig(spec);
  const auto& devices = config["linux"]["devices"];
  REQUIRE(devices.size() == 2);
  CHECK(devices[1]["path"] == "/dev/nvidia0");
  CHECK(devices[1]["major"] == 1);  // /dev/null's
  CHECK(devices[1]["minor"] == 3);
  const auto& allowed = config["linux"]["resources"]["devices"];
  REQUIRE(allowed.size() == 3);  // deny all, then the two
  CHECK(allowed[0]["allow"] == false);
  CHECK(allowed[2]["major"] == 1);
  bool bound = false;
  for (const auto& m : config["mounts"]) {
    bound |= m["destination"] == "/usr/lib/x86_64-linux-gnu/libcuda.so.580.1" && m["type"] == "bind";
  }
  CHECK(bound);
  CHECK(config["hooks"]["createContainer"][0]["path"] == "/usr/bin/nvidia-ctk");
}

TEST_CASE("a CDI spec that cannot be read stops images, naming the file", "[B6]") {
  TempDir cdi;
  cdi.Write("broken.json", "{\"kind\": \"nvidia.com/gpu\", \"devices\": [");
  auto setup = GpuContainerSetup::Load({cdi.dir.string()}, "", "/dev/nvidia{index}");
  REQUIRE_FALSE(setup.ok());
  CHECK_THAT(std::string(setup.status().message()), Catch::Contains("broken.json"));
}

TEST_CASE("without a CDI spec a task gets its GPUs' nodes and the driver's directory on its paths", "[B6]") {
  TempDir driver;
  fs::create_directories(driver.dir / "lib64");
  auto setup = GpuContainerSetup::Load({"/nonexistent"}, driver.dir.string(), "/dev/nul{index}");
  REQUIRE(setup.ok());
  CHECK(setup->Describe() == "driver " + driver.dir.string());
  auto edits = setup->For({0});
  REQUIRE(edits.ok());
  REQUIRE_FALSE(edits->device_nodes.empty());
  CHECK(edits->device_nodes[0].host_path == "/dev/nul0");  // the --gpu_device pattern
  auto elsewhere = GpuContainerSetup::Load({"/nonexistent"}, "", "/srv/gpus/card{index}")->For({2});
  REQUIRE(elsewhere.ok());
  CHECK(elsewhere->device_nodes[0].container_path == "/dev/card2");  // in the container's /dev
  REQUIRE(edits->mounts.size() == 1);
  CHECK(edits->mounts[0].host_path == driver.dir.string());
  CHECK(edits->mounts[0].container_path == "/usr/local/nvidia");

  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=GPU-1", "LD_LIBRARY_PATH=/opt/lib"};
  ApplyEnv(edits->env, &env);
  CHECK(env[0] == "PATH=/usr/bin:/bin:/usr/local/nvidia/bin");
  CHECK(env[1] == "CUDA_VISIBLE_DEVICES=GPU-1");
  CHECK(env[2] == "LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib:/opt/lib");

  // No driver directory: the nodes alone, said at start.
  auto bare = GpuContainerSetup::Load({"/nonexistent"}, "/nonexistent", "/dev/nvidia{index}");
  REQUIRE(bare.ok());
  CHECK(bare->Describe() == "device nodes only");
}

TEST_CASE("a rootless bundle maps root to the account, and the helper runs the command as the account's own ids, "
          "with no cgroup asked for, GPU nodes bound and no GPU hook (issue 30 item 4)",
          "[B6]") {
  ContainerSpec spec;
  spec.rootfs = "/var/tmp/jointcloud-images-1001/abc/rootfs";
  spec.command = "python3 train.py";
  spec.user.uid = 1001;
  spec.user.gid = 1002;
  spec.user.groups = {1002, 27};
  spec.rootless = true;
  spec.userns_helper = "/usr/lib/jointcloud/nexec-userns-exec";
  spec.cgroup = "jc-slurm-7";
  spec.gpu.device_nodes = {{"/dev/null", "/dev/nvidia0"}};
  spec.gpu.hooks["createContainer"] = nlohmann::json::array({{{"path", "/usr/bin/nvidia-ctk"}}});
  auto config = ContainerConfig(spec);
  const auto& linux_config = config["linux"];
  CHECK_FALSE(config.contains("hooks"));  // root's work, which would run as the account
  CHECK(linux_config["uidMappings"] == nlohmann::json::parse(R"([{"containerID":0,"hostID":1001,"size":1}])"));
  CHECK(linux_config["gidMappings"] == nlohmann::json::parse(R"([{"containerID":0,"hostID":1002,"size":1}])"));
  CHECK_FALSE(linux_config.contains("cgroupsPath"));  // the batch system's cgroup holds it
  CHECK_FALSE(linux_config.contains("devices"));      // a user namespace makes no nodes
  bool user_ns = false;
  for (const auto& ns : linux_config["namespaces"]) user_ns |= ns["type"] == "user";
  CHECK(user_ns);
  const auto& process = config["process"];
  CHECK(process["args"] == nlohmann::json::parse(
                               R"(["/tmp/.jc-userns-exec","1001","1002","/bin/sh","-c","python3 train.py"])"));
  CHECK(process["user"]["uid"] == 0);
  CHECK(process["user"]["additionalGids"].empty());
  CHECK(process["noNewPrivileges"] == true);
  bool helper = false, gpu = false;
  for (const auto& m : config["mounts"]) {
    helper |= m["destination"] == "/tmp/.jc-userns-exec" && m["source"] == spec.userns_helper;
    gpu |= m["destination"] == "/dev/nvidia0" && m["source"] == "/dev/null" && m["type"] == "bind";
  }
  CHECK(helper);
  CHECK(gpu);

  // The host's /dev for a batch system's cgroup to confine (Slurm GPU jobs): no private one.
  spec.host_dev = true;
  auto host_dev = ContainerConfig(spec);
  int dev_mounts = 0;
  bool bound_dev = false;
  for (const auto& m : host_dev["mounts"]) {
    const std::string to = m["destination"];
    dev_mounts += to.rfind("/dev", 0) == 0;
    bound_dev |= to == "/dev" && m["type"] == "bind" && m["source"] == "/dev";
  }
  CHECK(bound_dev);
  CHECK(dev_mounts == 1);
  spec.host_dev = false;

  // Not rootless (root's job, or nexec's agent): the ids are set by runc, no helper.
  spec.rootless = false;
  auto rootful = ContainerConfig(spec);
  CHECK(rootful["process"]["user"]["uid"] == 1001);
  CHECK(rootful["process"]["args"][0] == "/bin/sh");
  CHECK(rootful["linux"]["cgroupsPath"] == "jc-slurm-7");
  CHECK(rootful["hooks"]["createContainer"][0]["path"] == "/usr/bin/nvidia-ctk");
}

TEST_CASE("a task's working directory is bound from where the agent attached it, never by the user's path, and a "
          "directory of the container's own is bound from nowhere",
          "[B9][C6]") {
  ContainerSpec spec;
  spec.rootfs = "/images/x/rootfs";
  spec.command = "pwd";
  spec.cwd = "/home/alice/work";
  spec.cwd_source = "/store/.bundles/1.0.0/mnt/0";
  auto bound = [](const nlohmann::json& config, const std::string& destination) {
    std::vector<std::string> sources;
    for (const auto& m : config["mounts"]) {
      if (m["destination"] == destination) sources.push_back(m["source"]);
    }
    return sources;
  };
  auto config = ContainerConfig(spec);
  CHECK(config["process"]["cwd"] == "/home/alice/work");
  CHECK(bound(config, "/home/alice/work") == std::vector<std::string>{"/store/.bundles/1.0.0/mnt/0"});
  spec.cwd = "/tmp";
  spec.cwd_source.clear();
  spec.cwd_in_container = true;
  config = ContainerConfig(spec);
  CHECK(config["process"]["cwd"] == "/tmp");
  CHECK(bound(config, "/tmp") == std::vector<std::string>{"tmpfs"});  // its own /tmp only
}
