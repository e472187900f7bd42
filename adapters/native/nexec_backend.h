#pragma once

// The native adapter's backend: the bundled executor (nexec) reached through its
// master's gRPC API. A replica is one nexec job named after the replica; a resource spec
// becomes a slot count and a requirement string; a gang is one multi-section job.

#include <atomic>
#include <memory>
#include <string>

#include <google/protobuf/timestamp.pb.h>

#include "adapters/sdk/backend.h"
#include "executor/auth/munge_auth.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::adapter {

// "cpu 8, memory 64 GiB, gpu 1" -> 8 slots: "1{rusage[mem=8192,gpu=1]} 7{rusage[mem=8192]}".
// nexec reserves per slot and GPUs are whole, so GPUs go to their own section.
struct NexecShape {
  int slots = 1;
  std::string requirement;
};
NexecShape ShapeForSpec(const pb::SpecOffer& spec);

// How long a replica would wait from the master's `now` to its estimated `start`, in
// seconds: 0 for a start already due, at most kMaxStartWaitSeconds (366 days). The master is
// another process and its timestamps any int64: computed without int64 nanoseconds (which
// end in 2262) or a subtraction that could overflow, so a far or absurd start saturates.
// A master's timestamp as an absl::Time, for any seconds it sends (past 2262, where int64
// nanoseconds end, too).
absl::Time TimeOf(const google::protobuf::Timestamp& t);
inline constexpr double kMaxStartWaitSeconds = 366.0 * 86400;
double StartWaitSeconds(const google::protobuf::Timestamp& now, const google::protobuf::Timestamp& start);

class NexecBackend final : public Backend {
 public:
  // `master` is host:port of nexec-master; `queue` empty = its default queue.
  // Calls `master` signed with `auth` (munge): the adapter's account must be root or one of
  // the executor's administrators to submit as the accounts a center maps projects to.
  // `master_accounts`: whose answers count besides root (MasterList::MasterAccounts; empty:
  // $NEXEC_MASTER_UID, else the adapter's own account and "nexec").
  NexecBackend(const std::string& master, std::string queue, nexec::MungeAuth auth,
               const std::string& master_accounts = "");
  ~NexecBackend() override;

  absl::StatusOr<pb::CenterInfo> Describe() override;
  absl::StatusOr<pb::Usage> GetUsage() override;
  // From the master's backfill planner (EstimateStart): a probe shaped as a replica of
  // each spec; a spec whose start nexec does not know is left out.
  absl::StatusOr<std::vector<pb::SpecStartEstimate>> StartEstimates(
      const std::vector<pb::SpecOffer>& specs) override;
  // nexec runs a replica in its image (nexec submit --image).
  bool RunsImages() const override { return true; }
  absl::StatusOr<std::string> Submit(const ReplicaLaunch& launch) override;
  // The replicas as one job pack (Master.SubmitPack): one call and one commit of the master.
  std::vector<absl::StatusOr<std::string>> SubmitEach(const std::vector<ReplicaLaunch>& launches) override;
  absl::StatusOr<std::vector<std::string>> SubmitGang(const std::vector<ReplicaLaunch>& launches) override;
  absl::Status Stop(const std::string& external_id) override;
  // nexec's Kill with only_if_pending: the master checks and kills on its loop.
  absl::StatusOr<bool> Withdraw(const std::string& external_id) override;
  absl::StatusOr<std::map<std::string, ReplicaObservation>> Poll(
      const std::vector<std::string>& external_ids) override;
  // nexec's master and the task's agent run the command (nexec exec), as the job's account,
  // in its container when it runs in one: the adapter passes the exec stream through.
  absl::StatusOr<std::unique_ptr<ExecRelay>> RelayExec(const ExecRequest& request) override;
  absl::StatusOr<std::string> ReadLog(const std::string& external_id, bool stderr, int64_t offset,
                                      int64_t max_bytes) override;

 private:
  // The master's Submit for `launch`: the replica's name as the job's submit key.
  ::nexec::v1::SubmitRequest RequestFor(const ReplicaLaunch& launch) const;
  struct Client;
  std::unique_ptr<Client> client_;
  std::string queue_;
  std::atomic<bool> packs_{true};  // false once the master answered a pack UNIMPLEMENTED
};

}  // namespace jc::adapter
