#pragma once

// The devices a task may not open, under cgroup v2 (task_cgroup.h). v2 has no devices.deny
// file: access to device nodes is decided by BPF programs attached to the cgroup
// (BPF_PROG_TYPE_CGROUP_DEVICE), as runc and systemd do it. The program here denies the
// listed character devices (read, write and mknod) and allows everything else; programs
// attached above it (systemd's DevicePolicy) still apply, since all of them must allow.

#include <vector>

#include "absl/status/statusor.h"
#include "executor/agent/task_cgroup.h"

namespace jc::nexec {

// Loads the program; its descriptor, which the caller closes.
absl::StatusOr<int> LoadDeviceFilter(const std::vector<CharDevice>& denied);
// Attaches program `program_fd` to the cgroup directory `cgroup_dir` (others attached there
// stay: BPF_F_ALLOW_MULTI), or detaches it.
absl::Status AttachDeviceFilter(const std::string& cgroup_dir, int program_fd);
absl::Status DetachDeviceFilter(const std::string& cgroup_dir, int program_fd);

}  // namespace jc::nexec
