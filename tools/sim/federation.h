#pragma once

// The federation jc-sim replays a trace over (docs/placement-quality.md, "Federation
// file"): GPU models and their speed, centers with capacity, prices, power, network and the
// datasets they hold, and scheduled outages. Loaded from YAML; every mistake is an
// InvalidArgument naming where it is.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::sim {

struct GpuModel {
  double performance = 1;  // speed relative to the reference GPU the trace's durations are on
  double watts = 300;      // one GPU while it runs (formula 1's P_exe)
};

struct SimCenter {
  std::string id;
  std::string topology;   // logical position, "cn/north/bj-1"
  std::string gpu_model;  // empty: a CPU-only center
  double gpus = 0, cpus = 0, memory_mb = 0;
  double price_per_gpu_hour = 0, price_per_cpu_hour = 0;
  double static_power_watts = 0;  // formula 1's P_static
  double watts_per_cpu = 10;
  double performance = 1;  // multiplies the GPU model's (a faster interconnect, say)
  int security_grade = 0;
  double bandwidth_mbps = 1000, latency_ms = 5;
  std::vector<std::string> datasets;  // "name:version" present from the start
};

struct SimDataset {
  std::string key;  // "name:version"
  double size_mb = 0;
  bool is_private = false;  // never moves: its jobs go to it
};

struct Outage {
  std::string center;
  double start = 0, end = 0;  // seconds of virtual time
};

struct Federation {
  std::map<std::string, GpuModel> gpu_models;
  std::vector<SimCenter> centers;
  std::map<std::string, SimDataset> datasets;
  std::vector<Outage> outages;
  int retries = 3;  // attempts after the first when a center fails under a job

  double TotalGpus() const;
  double TotalCpus() const;
  // The center's speed for GPU jobs: its model's performance times its own factor.
  double PerformanceOf(const SimCenter& c) const;
  const SimCenter* Find(const std::string& id) const;
};

// Speeds relative to a V100 and board power of well-known models; a federation file may
// override them or add others.
std::map<std::string, GpuModel> BuiltinGpuModels();

absl::StatusOr<Federation> ParseFederation(const std::string& yaml_text);
absl::StatusOr<Federation> LoadFederation(const std::string& path);

// The checks a parsed or generated federation must pass (ids unique, capacities and
// prices not negative, a known GPU model per center, outages on known centers).
absl::Status ValidateFederation(const Federation& f);

// Writes the federation as YAML that ParseFederation reads back.
std::string FederationYaml(const Federation& f);

// A heterogeneous federation of `centers` centers, seeded: GPU models from V100 to H100,
// sizes from 8 to 256 GPUs, prices and power by model, a few regions.
Federation GenerateFederation(int centers, uint64_t seed);

}  // namespace jc::sim
