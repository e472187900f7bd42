#pragma once

// Small centers and requests for the scheduler's unit tests.

#include <string>

#include "services/scheduler/placement_request.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler::testing {

// An available center with 64 CPUs, 8 GPUs and 256 GB free, offering spec "gpu-1"
// (4 CPUs, 1 GPU, 16 GB) at `price`, and image "pytorch".
inline CenterView MakeCenter(const std::string& id, double price = 10) {
  CenterView c;
  c.id = id;
  c.available = true;
  c.security_grade = 3;
  c.topology = "cn/north/" + id;
  c.capacity = {64, 8, 0, 0, 262144, 1000};
  c.free = c.capacity;
  c.static_power_watts = 1000;
  c.performance_factor = 1;
  c.network = {1000, 10, 1, 0};
  c.specs["gpu-1"] = SpecAtCenter{{4, 1, 0, 0, 16384, 0}, price, 400};
  c.images.insert("pytorch");
  return c;
}

inline PlacementRequest MakeRequest(int task = 0, int replica = 0) {
  PlacementRequest r;
  r.job_id = "job-1";
  r.task_index = task;
  r.replica_index = replica;
  r.spec_id = "gpu-1";
  r.image_id = "pytorch";
  r.now = absl::FromUnixSeconds(1'800'000'000);
  return r;
}

}  // namespace jc::scheduler::testing
