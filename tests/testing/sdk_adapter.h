#pragma once

// An adapter's SDK server (AdapterServer) over a real backend, for the conformance cases that
// go through AdapterCore as the control plane would: the SDK's own bookkeeping (its records,
// its count of replicas still waiting in the center's usage) is part of what they test.
// Catch2 assertions inside: for tests only.

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "adapters/sdk/adapter_core.h"
#include "adapters/sdk/center_config.h"
#include "adapters/sdk/run_adapter.h"

namespace jc::testing {

class SdkAdapter {
 public:
  // Serves `center_yaml` over `backend` on a loopback port of its own, its state in a fresh
  // directory under `dir`; replicas it submits are named after `name`, the process and the time.
  SdkAdapter(adapter::Backend* backend, const std::string& center_yaml, const std::filesystem::path& dir,
             const std::string& name)
      : run_(absl::StrCat(name, getpid(), "x", absl::ToUnixMillis(absl::Now()))) {
    auto center = adapter::ParseCenterConfig(center_yaml);
    INFO(center.status().ToString());
    REQUIRE(center.ok());
    adapter::AdapterOptions o;
    o.listen = "127.0.0.1:0";
    o.metrics_address = "";
    o.state_dir = (dir / absl::StrCat(run_, "-adapter")).string();
    o.center = *center;
    auto server = adapter::AdapterServer::Start(backend, o);
    INFO(server.status().ToString());
    REQUIRE(server.ok());
    server_ = std::move(server).value();
  }

  // Stops what it submitted: a case that failed half-way leaves nothing running that the
  // next case on the same center would count.
  ~SdkAdapter() {
    for (const auto& key : submitted_) (void)core().StopReplica(key);
  }
  SdkAdapter(const SdkAdapter&) = delete;
  SdkAdapter& operator=(const SdkAdapter&) = delete;

  adapter::AdapterCore& core() { return server_->core(); }

  // Submits a replica of job `job` (unique within this adapter) of spec `spec`; its key.
  adapter::pb::ReplicaKey Submit(const std::string& job, const std::string& spec,
                                 const std::string& command = "sleep 300", int time_limit_seconds = 0) {
    adapter::pb::SubmitReplicaRequest req;
    req.mutable_key()->set_job_id(run_ + job);
    req.set_command(command);
    req.set_resource_spec_id(spec);
    if (time_limit_seconds > 0) req.set_time_limit_seconds(time_limit_seconds);
    auto r = core().Submit(req);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    submitted_.push_back(r->key());
    return r->key();
  }

 private:
  std::string run_;
  std::unique_ptr<adapter::AdapterServer> server_;
  std::vector<adapter::pb::ReplicaKey> submitted_;
};

}  // namespace jc::testing
