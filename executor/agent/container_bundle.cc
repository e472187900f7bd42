#include "executor/agent/container_bundle.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>

namespace jc::nexec {

using json = nlohmann::json;

json ContainerConfig(const ContainerSpec& spec) {
  json gids = json::array();
  for (gid_t g : spec.user.groups) gids.push_back(g);
  json mounts = json::array({
      {{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
      {{"destination", "/dev"}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}},
      {{"destination", "/dev/pts"}, {"type", "devpts"}, {"source", "devpts"},
       {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}},
      {{"destination", "/dev/shm"}, {"type", "bind"}, {"source", "/dev/shm"}, {"options", {"rbind", "nosuid", "nodev"}}},
      {{"destination", "/dev/mqueue"}, {"type", "mqueue"}, {"source", "mqueue"}, {"options", {"nosuid", "noexec", "nodev"}}},
      {{"destination", "/sys"}, {"type", "bind"}, {"source", "/sys"}, {"options", {"rbind", "nosuid", "noexec", "nodev", "ro"}}},
      {{"destination", "/tmp"}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"nosuid", "nodev", "mode=1777"}}},
  });
  std::string cwd = spec.cwd.empty() ? "/" : spec.cwd;
  if (cwd != "/") {
    mounts.push_back({{"destination", cwd}, {"type", "bind"}, {"source", cwd}, {"options", {"rbind", "rw"}}});
  }
  for (const ContainerMount& m : spec.gpu.mounts) {
    json options = m.options;
    if (std::find(m.options.begin(), m.options.end(), "bind") == m.options.end() &&
        std::find(m.options.begin(), m.options.end(), "rbind") == m.options.end()) {
      options.push_back("rbind");
    }
    mounts.push_back({{"destination", m.container_path}, {"type", "bind"}, {"source", m.host_path}, {"options", options}});
  }
  json devices = json::array();
  json allowed = json::array({{{"allow", false}, {"access", "rwm"}}});
  for (const ContainerDevice& node : spec.gpu.device_nodes) {
    struct stat st {};
    if (stat(node.host_path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
    const auto major_number = static_cast<int64_t>(major(st.st_rdev));
    const auto minor_number = static_cast<int64_t>(minor(st.st_rdev));
    devices.push_back({{"path", node.container_path}, {"type", "c"}, {"major", major_number}, {"minor", minor_number},
                       {"fileMode", st.st_mode & 07777}, {"uid", 0}, {"gid", 0}});
    allowed.push_back({{"allow", true}, {"type", "c"}, {"major", major_number}, {"minor", minor_number}, {"access", "rwm"}});
  }
  json config = {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", spec.user.uid}, {"gid", spec.user.gid}, {"additionalGids", gids}}},
        {"args", {"/bin/sh", "-c", spec.command}},
        {"env", spec.env},
        {"cwd", cwd},
        {"noNewPrivileges", spec.user.uid != 0}}},
      {"root", {{"path", spec.rootfs}, {"readonly", true}}},
      {"mounts", mounts},
      {"linux",
       {{"cgroupsPath", spec.cgroup},  // relative: below the task's own cgroup
        {"namespaces", json::array({{{"type", "mount"}}})},
        {"devices", devices},
        {"resources", {{"devices", allowed}}},
        {"maskedPaths", {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"}},
        {"readonlyPaths", {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}}},
  };
  if (!spec.gpu.hooks.empty()) config["hooks"] = spec.gpu.hooks;
  if (spec.user.uid == 0) {
    // Root inside only where the task's user is root on the host (the queue allowed it).
    const json caps = {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
                       "CAP_SETUID", "CAP_NET_BIND_SERVICE"};
    config["process"]["capabilities"] = {{"bounding", caps}, {"effective", caps}, {"permitted", caps}};
  }
  return config;
}

}  // namespace jc::nexec
