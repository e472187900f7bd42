#pragma once

// A task in its OCI image (issue 30): the runtime bundle runc runs it from. The agent's
// child, in the task's cgroup, execs nexec-image-run, which pulls the image into the
// agent's store once per host (by digest, verified by skopeo; concurrent tasks wait on a
// lock) and execs `runc run` with this bundle. The container:
//   - runs the task's command with `/bin/sh -c` as the task's user (uid, gid, groups;
//     no capabilities, no new privileges), never as root unless the user is root;
//   - sees the image's files read-only, a private /tmp, the task's working directory at
//     the same path (read-write; opened as the user, never bound by its path as root),
//     and the host's /dev/shm;
//   - shares the host's network, PID and IPC namespaces (MPI, torch.distributed and the
//     agent's GPU misuse check see it as they see bare tasks); its own mount namespace;
//   - sits in a cgroup below the task's (runc's cgroupsPath is relative; named as the
//     container, unique on the host, for the hierarchies the agent does not use), so kill,
//     suspend, limits and usage of the task hold for it unchanged;
//   - may open the device nodes of the GPUs the task holds, with what the driver needs
//     beside them (gpu_container_edits.h: a CDI spec's edits, or the driver's directory).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/container/gpu_container_edits.h"
#include "executor/agent/task_cgroup.h"
#include "executor/agent/user_files.h"

namespace jc::nexec {

struct ContainerSpec {
  std::string rootfs;            // the unpacked image
  std::vector<std::string> env;  // "K=V"
  std::string command;           // for /bin/sh -c
  std::string cwd;               // the task's directory; bound at the same path
  // What is bound there: `cwd` itself when empty (a path the batch system chose), else
  // where the task's child attached the directory the agent opened as the user, in the
  // bundle (issue 44: runc resolves bind sources as root, so a user's path never reaches it).
  std::string cwd_source;
  bool cwd_in_container = false;  // `cwd` is the container's own (its /tmp): nothing bound
  Account user;
  GpuContainerEdits gpu;  // device nodes, mounts, env and hooks for the GPUs the task holds
  // The container's cgroup, relative to runc's own (the task's, where the agent contains
  // it; the root of hierarchies it does not): unique on the host, as the container id.
  std::string cgroup;
  // Rootless: the task's user runs runc itself (a Slurm job's batch script does, and a nexec
  // agent that runs as that account, not root). runc
  // maps root inside to that user (the one id an unprivileged account may map), and
  // `userns_helper` (nexec-userns-exec, bound at /tmp/.jc-userns-exec) nests a user
  // namespace mapping the user's own uid and gid to it, so the command runs as the user
  // (no other groups, no capabilities). PID and IPC namespaces of its own (for /proc and
  // /dev/mqueue); device nodes are bound rather than made, no GPU hook is run (hooks do
  // root's work, and would run as the user), and no cgroup is asked for: the batch
  // system's cgroup around the script (the task's, at a nexec agent) contains it.
  bool rootless = false;
  std::string userns_helper;
  // Rootless only: the host's /dev instead of a private one, for a batch system whose
  // cgroup decides which devices the job may open (Slurm's ConstrainDevices picks its GPUs
  // after the bundle is written). The container's user is the host user with no
  // capability, so it opens no device it could not open outside.
  bool host_dev = false;
  std::vector<ContainerMount> mounts;  // more binds (e.g. a Slurm job's environment file)
  // An interactive task on a terminal (nexec submit -Ip): runc gives the container a
  // terminal of its own and relays it to the task's (its size and resizes included).
  bool terminal = false;
};

// The bundle's config.json (OCI runtime spec 1.0).
nlohmann::json ContainerConfig(const ContainerSpec& spec);

// The argv that runs `command` in the running rootless container `id` (runc's state under
// `runc_root`), as its account: the command would run in a user namespace nested in
// runc's, which `runc exec` joins first and then can join none of the container's other
// namespaces, so nexec-userns-exec (`helper`) --enter joins them in order, beside the
// container's process that runc's state names. Not running: exit 125 and `not_running`.
std::vector<std::string> RootlessExecArgv(const std::string& runc_root, const std::string& id,
                                          const std::string& helper, const std::string& not_running,
                                          const std::vector<std::string>& command);

}  // namespace jc::nexec
