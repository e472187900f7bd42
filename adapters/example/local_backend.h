#pragma once

// The SDK's example adapter: runs every replica as a local process on the adapter's own
// machine. Small on purpose (docs/adapter-sdk.md walks through it): what a replica did
// is kept in files under the work directory, so the adapter may restart while replicas
// run and still report how they ended.

#include <mutex>
#include <set>
#include <string>

#include "adapters/sdk/backend.h"

namespace jc::adapter {

class LocalBackend final : public Backend {
 public:
  // `work_dir` holds one directory per replica (pid, output, exit code); `cpus` and
  // `memory_mb` are the capacity this machine offers.
  LocalBackend(std::string work_dir, int cpus, int memory_mb);

  absl::StatusOr<pb::CenterInfo> Describe() override;
  absl::StatusOr<pb::Usage> GetUsage() override;
  absl::StatusOr<std::string> Submit(const ReplicaLaunch& launch) override;
  absl::Status Stop(const std::string& external_id) override;
  // Its replicas start when submitted: none waits to be taken back.
  absl::StatusOr<bool> Withdraw(const std::string& external_id) override { return false; }
  absl::StatusOr<std::map<std::string, ReplicaObservation>> Poll(
      const std::vector<std::string>& external_ids) override;
  // The command on this machine, as the replica's account, in its working directory and
  // with its environment (its wrapper's, as the adapter gave it).
  absl::StatusOr<ExecPlan> PlanExec(const ExecRequest& request) override;
  absl::StatusOr<std::string> ReadLog(const std::string& external_id, bool stderr, int64_t offset,
                                      int64_t max_bytes) override;

 private:
  std::string Dir(const std::string& id) const;
  ReplicaObservation Observe(const std::string& id);

  std::string work_dir_;
  int cpus_;
  int memory_mb_;
  std::mutex mu_;
  std::set<std::string> running_;  // ids submitted and not ended, for usage
};

}  // namespace jc::adapter
