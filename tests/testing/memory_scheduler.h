#pragma once

// A center's scheduler in memory, for the adapter SDK's tests and benchmarks: a replica is
// submitted in the state the test chooses and keeps it until told otherwise; a gang is one
// job of the scheduler's (its replicas share one id), as nexec's multi-host jobs are. Its
// own cost stays flat however many jobs it holds (a hash map).

#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/numbers.h"
#include "adapters/sdk/backend.h"

namespace jc::testing {

class MemoryScheduler final : public adapter::Backend {
 public:
  explicit MemoryScheduler(adapter::pb::ReplicaState submitted_as) : submitted_as_(submitted_as) {}

  absl::StatusOr<adapter::pb::CenterInfo> Describe() override { return adapter::pb::CenterInfo(); }
  absl::StatusOr<adapter::pb::Usage> GetUsage() override {
    adapter::pb::Usage u;
    u.mutable_free()->set_cpu(free_cpu_);
    u.mutable_free()->set_memory(1 << 20);
    return u;
  }
  absl::StatusOr<std::string> Submit(const adapter::ReplicaLaunch& launch) override {
    std::lock_guard<std::mutex> lock(mu_);
    environments_.push_back(launch.env);
    return NewJobLocked();
  }
  absl::StatusOr<std::vector<std::string>> SubmitGang(const std::vector<adapter::ReplicaLaunch>& launches) override {
    std::lock_guard<std::mutex> lock(mu_);
    return std::vector<std::string>(launches.size(), NewJobLocked());
  }
  absl::Status Stop(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_.push_back(id);
    states_[id] = adapter::pb::REPLICA_STOPPED;
    return absl::OkStatus();
  }
  absl::StatusOr<bool> Withdraw(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = states_.find(id);
    if (it == states_.end() || it->second != adapter::pb::REPLICA_PENDING) return false;
    it->second = adapter::pb::REPLICA_STOPPED;
    return true;
  }
  absl::StatusOr<std::map<std::string, adapter::ReplicaObservation>> Poll(const std::vector<std::string>& ids) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, adapter::ReplicaObservation> out;
    for (const auto& id : ids) {
      auto it = states_.find(id);
      if (it == states_.end()) continue;
      adapter::ReplicaObservation o;
      o.state = it->second;
      out[id] = o;
    }
    return out;
  }
  absl::StatusOr<std::string> ReadLog(const std::string&, bool, int64_t, int64_t) override { return ""; }

  // The job `id` is now in `state` (it started, it ended).
  void Set(const std::string& id, adapter::pb::ReplicaState state) {
    std::lock_guard<std::mutex> lock(mu_);
    states_[id] = state;
  }
  // Every job from the `first`-th submitted on is now in `state`.
  void SetFrom(int64_t first, adapter::pb::ReplicaState state) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, s] : states_) {
      int64_t n = 0;
      if (absl::SimpleAtoi(id, &n) && n >= first) s = state;
    }
  }
  int64_t submitted() {
    std::lock_guard<std::mutex> lock(mu_);
    return next_;
  }
  std::vector<std::string> stopped() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  }
  // The environment of each replica submitted alone or in a batch, in order.
  std::vector<std::map<std::string, std::string>> environments() {
    std::lock_guard<std::mutex> lock(mu_);
    return environments_;
  }

 private:
  std::string NewJobLocked() {
    const std::string id = std::to_string(++next_);
    states_[id] = submitted_as_;
    return id;
  }

  const adapter::pb::ReplicaState submitted_as_;
  const int32_t free_cpu_ = 1 << 20;
  std::mutex mu_;
  int64_t next_ = 0;
  std::unordered_map<std::string, adapter::pb::ReplicaState> states_;
  std::vector<std::string> stopped_;
  std::vector<std::map<std::string, std::string>> environments_;
};

}  // namespace jc::testing
