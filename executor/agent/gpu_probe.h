#pragma once

// What the agent learns about the host's NVIDIA GPUs every heartbeat (SPEC B6, B8), from
// `nvidia-smi` queries (NVML underneath): each GPU's index, model, memory and utilisation,
// and which processes use which GPU with how much memory. The agent turns that into host
// resources (`model`, `gpumem`), per-task GPU usage, and misuse detection (a task's
// process on a GPU not given to its job). The queries' CSV is parsed here, so tests can
// feed scripted output through a fake `nvidia-smi`.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::nexec {

struct GpuSample {
  int index = 0;
  std::string uuid;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  double memory_total_mb = 0;
  double memory_used_mb = 0;
  double utilization_pct = 0;
};

struct GpuProcess {
  int gpu_index = -1;  // resolved from the GPU's uuid
  pid_t pid = 0;
  double used_memory_mb = 0;
};

struct GpuSnapshot {
  std::vector<GpuSample> gpus;
  std::vector<GpuProcess> processes;
};

// `--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu
//  --format=csv,noheader,nounits` output; malformed lines are errors naming them.
absl::StatusOr<std::vector<GpuSample>> ParseGpuQuery(const std::string& csv);
// `--query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits`, with
// GPU indices taken from `gpus` (a process on an unknown uuid is left out).
absl::StatusOr<std::vector<GpuProcess>> ParseComputeApps(const std::string& csv, const std::vector<GpuSample>& gpus);

// The short model name `select[model==H100]` compares: "NVIDIA H100 80GB HBM3" -> "H100",
// "NVIDIA A100-SXM4-80GB" -> "A100", "Tesla V100-PCIE-16GB" -> "V100",
// "NVIDIA GeForce RTX 4090" -> "RTX4090".
std::string GpuModel(const std::string& name);

class GpuProbe {
 public:
  // `nvidia_smi`: a path, or a name looked up on $PATH ("nvidia-smi").
  explicit GpuProbe(std::string nvidia_smi) : nvidia_smi_(std::move(nvidia_smi)) {}
  // The resolved executable; empty when there is none (a host without NVIDIA GPUs).
  std::string Executable() const;
  // Both queries; NotFound without nvidia-smi, Unavailable when it fails.
  absl::StatusOr<GpuSnapshot> Sample() const;

 private:
  std::string nvidia_smi_;
};

}  // namespace jc::nexec
