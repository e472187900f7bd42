#pragma once

// The native adapter's backend: the bundled executor (nexec) reached through its
// master's gRPC API. A replica is one nexec job named after the replica; a resource spec
// becomes a slot count and a requirement string; a gang is one multi-section job.

#include <memory>
#include <string>

#include "adapters/sdk/backend.h"
#include "executor/auth/munge_auth.h"

namespace jc::adapter {

// "cpu 8, memory 64 GiB, gpu 1" -> 8 slots: "1{rusage[mem=8192,gpu=1]} 7{rusage[mem=8192]}".
// nexec reserves per slot and GPUs are whole, so GPUs go to their own section.
struct NexecShape {
  int slots = 1;
  std::string requirement;
};
NexecShape ShapeForSpec(const pb::SpecOffer& spec);

class NexecBackend final : public Backend {
 public:
  // `master` is host:port of nexec-master; `queue` empty = its default queue.
  // Calls `master` signed with `auth` (munge): the adapter's account must be root or one of
  // the executor's administrators to submit as the accounts a center maps projects to.
  NexecBackend(const std::string& master, std::string queue, nexec::MungeAuth auth);
  ~NexecBackend() override;

  absl::StatusOr<pb::CenterInfo> Describe() override;
  absl::StatusOr<pb::Usage> GetUsage() override;
  // nexec runs a replica in its image (nexec submit --image).
  bool RunsImages() const override { return true; }
  absl::StatusOr<std::string> Submit(const ReplicaLaunch& launch) override;
  absl::StatusOr<std::vector<std::string>> SubmitGang(const std::vector<ReplicaLaunch>& launches) override;
  absl::Status Stop(const std::string& external_id) override;
  absl::StatusOr<std::map<std::string, ReplicaObservation>> Poll(
      const std::vector<std::string>& external_ids) override;
  absl::StatusOr<std::string> ReadLog(const std::string& external_id, bool stderr, int64_t offset,
                                      int64_t max_bytes) override;

 private:
  struct Client;
  std::unique_ptr<Client> client_;
  std::string queue_;
};

}  // namespace jc::adapter
