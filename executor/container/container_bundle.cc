#include "executor/container/container_bundle.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>

#include "absl/strings/match.h"

namespace jc::nexec {

using json = nlohmann::json;

namespace {
constexpr const char* kUsernsHelper = "/tmp/.jc-userns-exec";  // below the private /tmp
}  // namespace

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
  if (spec.rootless && spec.host_dev) {
    json kept = json::array();
    for (const auto& m : mounts) {
      if (!absl::StartsWith(m["destination"].get<std::string>(), "/dev")) kept.push_back(m);
    }
    kept.push_back({{"destination", "/dev"}, {"type", "bind"}, {"source", "/dev"}, {"options", {"rbind", "nosuid"}}});
    mounts = std::move(kept);
  }
  std::string cwd = spec.cwd.empty() ? "/" : spec.cwd;
  if (cwd != "/" && !spec.cwd_in_container) {
    const std::string source = spec.cwd_source.empty() ? cwd : spec.cwd_source;
    mounts.push_back({{"destination", cwd}, {"type", "bind"}, {"source", source}, {"options", {"rbind", "rw"}}});
  }
  std::vector<ContainerMount> binds = spec.gpu.mounts;
  binds.insert(binds.end(), spec.mounts.begin(), spec.mounts.end());
  if (spec.rootless) binds.push_back({spec.userns_helper, kUsernsHelper, {"bind", "ro", "nosuid", "nodev"}});
  if (spec.rootless && !spec.host_dev) {
    // A user namespace cannot make device nodes: the host's are bound instead (with the
    // host's /dev they are there already).
    for (const ContainerDevice& node : spec.gpu.device_nodes) {
      binds.push_back({node.host_path, node.container_path, {"rbind", "nosuid", "noexec"}});
    }
  }
  for (const ContainerMount& m : binds) {
    json options = m.options;
    if (std::find(m.options.begin(), m.options.end(), "bind") == m.options.end() &&
        std::find(m.options.begin(), m.options.end(), "rbind") == m.options.end()) {
      options.push_back("rbind");
    }
    mounts.push_back({{"destination", m.container_path}, {"type", "bind"}, {"source", m.host_path}, {"options", options}});
  }
  json devices = json::array();
  json allowed = json::array({{{"allow", false}, {"access", "rwm"}}});
  for (const ContainerDevice& node : spec.rootless ? std::vector<ContainerDevice>{} : spec.gpu.device_nodes) {
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
       {{"terminal", spec.terminal},
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
  if (spec.rootless) {
    auto& linux_config = config["linux"];
    linux_config["namespaces"] = json::array({{{"type", "mount"}}, {{"type", "user"}}, {{"type", "pid"}}, {{"type", "ipc"}}});
    linux_config["uidMappings"] = json::array({{{"containerID", 0}, {"hostID", spec.user.uid}, {"size", 1}}});
    linux_config["gidMappings"] = json::array({{{"containerID", 0}, {"hostID", spec.user.gid}, {"size", 1}}});
    linux_config.erase("cgroupsPath");
    linux_config.erase("devices");
    linux_config.erase("resources");
    // Root in the container's user namespace (the user outside) only long enough for the
    // helper to map the user's ids below it; the command then has none of these. SETFCAP:
    // the kernel lets a namespace map its parent's root (as the helper's does) only when
    // its creator held it.
    auto& process = config["process"];
    process["user"] = {{"uid", 0}, {"gid", 0}, {"additionalGids", json::array()}};
    process["args"] = {kUsernsHelper, std::to_string(spec.user.uid), std::to_string(spec.user.gid), "/bin/sh", "-c",
                       spec.command};
    const json caps = {"CAP_SETUID", "CAP_SETGID", "CAP_SETFCAP"};
    process["capabilities"] = {{"bounding", caps}, {"effective", caps}, {"permitted", caps}};
  }
  if (!spec.gpu.hooks.empty() && !spec.rootless) config["hooks"] = spec.gpu.hooks;  // rootless: none (above)
  if (spec.user.uid == 0 && !spec.rootless) {
    // Root inside only where the task's user is root on the host (the queue allowed it).
    const json caps = {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
                       "CAP_SETUID", "CAP_NET_BIND_SERVICE"};
    config["process"]["capabilities"] = {{"bounding", caps}, {"effective", caps}, {"permitted", caps}};
  }
  return config;
}

std::vector<std::string> RootlessExecArgv(const std::string& runc_root, const std::string& id,
                                          const std::string& helper, const std::string& not_running,
                                          const std::vector<std::string>& command) {
  std::vector<std::string> argv = {
      "/bin/sh", "-c",
      "pid=$(runc --root \"$1\" state \"$2\" | sed -n "
      "'s/^[[:space:]]*\"pid\":[[:space:]]*\\([0-9][0-9]*\\),*$/\\1/p') && [ -n \"$pid\" ] || "
      "{ printf '%s\\n' \"$4\" >&2; exit 125; }; "
      "helper=$3; shift 4; exec \"$helper\" --enter \"$pid\" \"$@\"",
      "sh", runc_root, id, helper, not_running};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace jc::nexec
