#pragma once

// The adapter conformance kit (SPEC A14): Catch2 tests any adapter runs against its own
// backend, over the SDK's real gRPC server on loopback. An adapter's test binary links
// the kit (jc_adapter_conformance) and defines MakeConformanceTarget().

#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "adapters/sdk/backend.h"
#include "adapters/sdk/center_config.h"

namespace jc::adapter::conformance {

struct ConformanceTarget {
  std::string name;  // shown in failures
  // A new backend for the center; called again to restart the adapter mid-test.
  std::function<std::unique_ptr<Backend>()> make_backend;
  CenterConfig center;  // must offer `spec_id`
  std::string spec_id;  // a spec that fits the center at once
  // When the center cannot be reached here (no Slurm installed, not root, ...), the
  // reason: every kit test then fails with it, so a missing cluster is never green.
  std::string unavailable;
  absl::Duration timeout = absl::Seconds(60);  // for a replica to reach a state
  // Whether the center runs commands in replicas (`jcctl job exec`): then an UNIMPLEMENTED
  // answer fails the kit, else it is a warning.
  bool runs_commands = false;
};

// Defined by the adapter's test binary; called once per test case.
ConformanceTarget MakeConformanceTarget();

}  // namespace jc::adapter::conformance
