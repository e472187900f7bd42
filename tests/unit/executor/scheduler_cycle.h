#pragma once

// Helpers for scheduler unit tests: a job request from its requirement text, and one
// cycle's placements by job id.

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "executor/policy/scheduler.h"

namespace jc::nexec::testing {

inline JobRequest MakeJob(int64_t id, const std::string& user, int slots, const std::string& queue,
                          const std::string& requirement) {
  JobRequest r;
  r.id = id;
  r.user = user;
  r.queue = queue;
  r.slots = slots;
  auto parsed = ParseRequirement(requirement);
  REQUIRE(parsed.ok());
  r.requirement = *parsed;
  return r;
}

// A scheduler with one host h1 (`slots`, 64 GB) and the queue `queue`.
inline Scheduler OneHost(int slots, const QueueConfig& queue) {
  Scheduler s;
  HostConfig h;
  h.name = "h1";
  h.slots = slots;
  h.mem_mb = 65536;
  REQUIRE(s.AddHost(h).ok());
  REQUIRE(s.AddQueue(queue).ok());
  return s;
}

// Submits `jobs`, runs one cycle, answers the placements by job id.
inline std::map<int64_t, Placement> RunCycle(Scheduler& s, const std::vector<JobRequest>& jobs) {
  for (const auto& j : jobs) REQUIRE(s.Submit(j).ok());
  std::map<int64_t, Placement> out;
  for (auto& p : s.Cycle()) out[p.job_id] = p;
  return out;
}

}  // namespace jc::nexec::testing
