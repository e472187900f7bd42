#pragma once

// The agent's watch over the host's GPUs (SPEC B6, B8): what nvidia-smi says at start
// becomes host resources (the GPUs, `model`, `gpumem`); a failure at start (nvidia-smi
// there but not answering) is asked again on each periodic heartbeat until it answers;
// each periodic heartbeat samples the GPUs, and Assess says from a sample what each task
// used and which of its processes were on a GPU not given to its job (misuse). It holds no
// task: the agent hands it a view of its tasks and applies what it answers under its own
// lock. Not a thread: the heartbeat loop calls it (and Start, before that loop runs).

#include <sys/types.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "executor/agent/gpu_probe.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

class GpuWatch {
 public:
  // What Assess needs of a running task: its process group (the group a GPU process is
  // in says whose it is; none while it has no process), the GPUs it was given, those it was already
  // reported on, and the ids its note names.
  struct TaskGpus {
    std::string key;
    std::optional<pid_t> pgid;
    std::vector<int> gpus;
    std::set<int> misused;
    int64_t job_id = 0;
    int32_t task_index = 0;
    int32_t attempt = 0;
  };
  // A task's process on a GPU not given to its job, reported once per task and GPU.
  struct Misuse {
    std::string key;
    int gpu = -1;
    ::nexec::v1::TaskNote note;  // what the job's history says (killed as `kill_misuse` says)
  };
  // One sample applied to the tasks: each task's GPU memory (summed over its processes)
  // and the mean utilisation of its GPUs (every task given, 0 for one without GPUs), and
  // the misuse found, in the sample's order.
  struct Assessment {
    struct Use {
      double memory_mb = 0;
      double utilization = 0;
    };
    std::map<std::string, Use> use;
    std::vector<Misuse> misuse;
  };

  // `nvidia_smi`: a path, or a name on $PATH.
  explicit GpuWatch(std::string nvidia_smi);

  // At start: the host's GPUs from nvidia-smi into `info` (the host as measured); the
  // watch runs when it shows some. An error other than NotFound (nvidia-smi is there but
  // failed) is returned, and the GPUs are then asked for again (Reprobing).
  absl::Status Probe(::nexec::v1::AgentInfo* info);
  // Whether nvidia-smi answered with GPUs (at start, or on a later try): periodic
  // heartbeats then Sample and Assess.
  bool Watching() const { return watching_; }
  // Whether nvidia-smi failed at start: asked again on each periodic heartbeat until it
  // answers, so a transient failure does not leave the host without its GPUs until a
  // restart.
  bool Reprobing() const { return reprobing_; }
  // One more try for a watch that failed at start: `base` (the host as it is now) with the
  // GPUs found and then `finish` (--resources over them, as at start) applied; nullopt
  // while nvidia-smi still fails, shows no GPU, or `finish` fails. Watching once it
  // answers a host to take.
  std::optional<::nexec::v1::AgentInfo> ProbeAgain(::nexec::v1::AgentInfo base,
                                                   absl::FunctionRef<absl::Status(::nexec::v1::AgentInfo*)> finish);

  // One nvidia-smi sample; nullopt (said in the log) when it fails.
  std::optional<GpuSnapshot> Sample() const;
  // What `sample` says of `tasks` (see Assessment). Looks up the process group of each
  // GPU process (getpgid); touches nothing else.
  static Assessment Assess(const GpuSnapshot& sample, const std::vector<TaskGpus>& tasks, bool kill_misuse);

  // The UUIDs of the given GPU indices, those known (for CUDA_VISIBLE_DEVICES in
  // containers). Any thread.
  std::vector<std::string> UuidsOf(const std::vector<int>& gpus) const;

 private:
  // The host's GPUs from `snapshot` into `info`; false when it shows none.
  bool Adopt(const GpuSnapshot& snapshot, ::nexec::v1::AgentInfo* info) const;
  void RememberUuids(const GpuSnapshot& snapshot);

  GpuProbe probe_;
  // Start's, then the heartbeat loop's alone.
  bool watching_ = false;
  bool reprobing_ = false;
  mutable absl::Mutex uuids_mu_;
  std::map<int, std::string> uuids_ ABSL_GUARDED_BY(uuids_mu_);  // each GPU's UUID by index
};

}  // namespace jc::nexec
