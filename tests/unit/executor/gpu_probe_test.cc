// What the agent reads from nvidia-smi (executor/agent/gpu_probe.h): GPUs, the processes
// on them, and the short model names select[] compares; bad output is an error naming
// the line, never a crash.

#include <catch2/catch.hpp>

#include "executor/agent/gpu_probe.h"

using namespace jc::nexec;

TEST_CASE("nvidia-smi's GPU and compute-app queries are read, processes mapped to GPU indices [B6][B8]",
          "[B6][B8]") {
  auto gpus = ParseGpuQuery(
      "0, GPU-aaaa, NVIDIA H100 80GB HBM3, 81559, 1024, 37\n"
      "1, GPU-bbbb, NVIDIA H100 80GB HBM3, 81559, [N/A], [Not Supported]\n");
  REQUIRE(gpus.ok());
  REQUIRE(gpus->size() == 2);
  CHECK((*gpus)[0].name == "NVIDIA H100 80GB HBM3");
  CHECK((*gpus)[0].memory_total_mb == 81559);
  CHECK((*gpus)[0].utilization_pct == 37);
  CHECK((*gpus)[1].memory_used_mb == 0);  // [N/A] reads as nothing known
  auto apps = ParseComputeApps("GPU-bbbb, 4242, 2048\nGPU-zzzz, 99, 10\n", *gpus);
  REQUIRE(apps.ok());
  REQUIRE(apps->size() == 1);  // a process on a GPU not listed is left out
  CHECK((*apps)[0].gpu_index == 1);
  CHECK((*apps)[0].pid == 4242);
  CHECK((*apps)[0].used_memory_mb == 2048);
  CHECK(ParseComputeApps("No running processes found\n", *gpus)->empty());
  CHECK(ParseComputeApps("", *gpus)->empty());

  auto bad = ParseGpuQuery("0, GPU-aaaa, H100\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("line 1") != std::string::npos);
  CHECK_FALSE(ParseComputeApps("GPU-aaaa, not-a-pid, 1\n", *gpus).ok());
}

TEST_CASE("GPU model names are shortened the way select[model==H100] expects [B6]", "[B6]") {
  CHECK(GpuModel("NVIDIA H100 80GB HBM3") == "H100");
  CHECK(GpuModel("NVIDIA A100-SXM4-80GB") == "A100");
  CHECK(GpuModel("Tesla V100-PCIE-16GB") == "V100");
  CHECK(GpuModel("NVIDIA GeForce RTX 4090") == "RTX4090");
  CHECK(GpuModel("NVIDIA L40S") == "L40S");
}

TEST_CASE("without nvidia-smi there are no GPUs to watch, and a failing one is an error [B8]", "[B8]") {
  GpuProbe none("/nonexistent/nvidia-smi");
  CHECK(none.Executable().empty());
  CHECK(none.Sample().status().code() == absl::StatusCode::kNotFound);
  GpuProbe failing("/bin/false");
  CHECK(failing.Sample().status().code() == absl::StatusCode::kUnavailable);
}
