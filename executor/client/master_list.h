#pragma once

// The nexec masters a client was given (issue 47): several processes on one store, one of
// which leads while the others stand by. Agents, the CLI, nexec-run and the native adapter
// take the list ("host:port,host:port") and call the leader; a standby answers
// UNAVAILABLE naming the leader in the trailing metadata "nexec-leader", and a master that
// is down answers nothing, so on UNAVAILABLE a client moves to the leader named (when the
// list has it) or to the next address. A list of one behaves as a single address always did.

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "executor/auth/munge_auth.h"
#include "nexec/v1/nexec.grpc.pb.h"

namespace jc::nexec {

inline constexpr char kLeaderMetadataKey[] = "nexec-leader";

class MasterList {
 public:
  // "host:port[,host:port...]": InvalidArgument for an empty list or entry, or one with no
  // port. `args` apply to every channel.
  static absl::StatusOr<std::unique_ptr<MasterList>> Parse(absl::string_view list,
                                                           const grpc::ChannelArguments& args = {});

  // The accounts a client takes masters' answers from besides root: those `accounts` names
  // (uids or account names, comma-separated), else those $NEXEC_MASTER_UID names, else the
  // caller's own account and the account "nexec" where the host has one. InvalidArgument
  // for an account the host does not know.
  static absl::StatusOr<std::vector<uid_t>> MasterAccounts(absl::string_view accounts = "");

  // From now on a Leadership answer counts only when the master proved it: signed in a
  // munge session whose acceptance root or one of `uids` made (MungeAuth::AnswerFrom).
  // Whoever listens at a listed address while its master is down is then told apart.
  void Prove(MungeAuth auth, std::vector<uid_t> uids);

  const std::vector<std::string>& addresses() const { return addresses_; }
  std::string Joined() const;
  // The address to call: the leader as last known (the first address at start).
  std::string Current() const;
  // The stub of `address`'s channel. Shared: a channel dropped after a failure (Failed)
  // lives on while a call or a stream still holds it.
  std::shared_ptr<::nexec::v1::Master::Stub> Stub(const std::string& address);
  // A call to `address` failed with `status`: true when another master may answer it
  // (UNAVAILABLE: a standby, or a master down or stopping; DEADLINE_EXCEEDED: one hung or
  // cut off); Current() is then the leader
  // the standby named (`leader_named`, LeaderNamed of the call's context), when the list
  // has it, else the next address.
  // UNAUTHENTICATED moves on too: an answer not proven to come from the master (someone
  // else listens there) or a master that refused the caller's proof.
  // Each of these also drops `address`'s channel (at most once every kResetEvery), with
  // one master as with several: whoever took a down master's port keeps the connections
  // it accepted when it lets the port go, and gRPC would call it on them for good
  // (attacker helper-60); the next call connects to whoever listens there now.
  bool Failed(const std::string& address, const grpc::Status& status, const std::string& leader_named);
  // The leader a standby named in its answer on `ctx` ("" when none).
  static std::string LeaderNamed(const grpc::ClientContext& ctx);

  // Each master's answer to Leadership (nexec masters), in list order.
  std::vector<std::pair<std::string, absl::StatusOr<::nexec::v1::LeadershipInfo>>> AskAll(absl::Duration timeout);
  // Asks the masters in turn until one says it leads (it becomes Current()) or `wait` has
  // passed: UNAVAILABLE then, with what each said.
  absl::StatusOr<std::string> FindLeader(absl::Duration wait);
  // At start: an address that answers and is not a nexec master (another service, a
  // master of another kind) is refused with InvalidArgument naming it; one that does not
  // answer is taken (a standby that is down now).
  absl::Status Check(absl::Duration timeout);

 private:
  explicit MasterList(std::vector<std::string> addresses, grpc::ChannelArguments args)
      : addresses_(std::move(addresses)), args_(std::move(args)) {}
  absl::StatusOr<::nexec::v1::LeadershipInfo> Ask(const std::string& address, absl::Duration timeout);

  const std::vector<std::string> addresses_;
  const grpc::ChannelArguments args_;
  std::optional<MungeAuth> auth_;  // set by Prove
  std::vector<uid_t> uids_;
  mutable std::mutex mu_;
  static constexpr absl::Duration kResetEvery = absl::Seconds(5);
  size_t current_ = 0;                                                           // under mu_
  std::map<std::string, std::shared_ptr<::nexec::v1::Master::Stub>> stubs_;  // under mu_
  std::map<std::string, absl::Time> reset_at_;                               // under mu_
};

}  // namespace jc::nexec
