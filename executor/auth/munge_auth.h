#pragma once

// Who is calling, proven with munge (SPEC B9), the way Slurm does it: the caller asks its
// local munged for a credential, which carries its uid and gid and is valid on every host
// that shares the munge key. Each call carries one credential, bound to the method and to
// the request's bytes, so a credential seen on the wire cannot be replayed (munged refuses
// a second decode) nor moved onto another request.
//
// One object is used on both sides: the CLI, the adapter, the agents' heartbeats and the
// master's launches Sign; the master and the agents Verify.

#include <sys/types.h>

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace google::protobuf {
class Message;
}
namespace grpc {
class ClientContext;
class ServerContext;
}  // namespace grpc

namespace jc::nexec {

// The account a verified call comes from.
struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;  // the account's name on this host, or the uid as text when it has none
  bool root() const { return uid == 0; }
};

class MungeAuth {
 public:
  // Signs and verifies with the munged listening on `socket`; empty means
  // $NEXEC_MUNGE_SOCKET when set, else libmunge's default socket.
  static MungeAuth Munge(std::string socket);
  // Development only (--auth=none): signs nothing and trusts every call as root.
  static MungeAuth Disabled();

  bool enabled() const { return enabled_; }
  const std::string& socket() const { return socket_; }

  // Adds a credential for `method` and `request` to the call.
  absl::Status Sign(grpc::ClientContext* ctx, absl::string_view method,
                    const google::protobuf::Message& request) const;
  // Checks the call's credential: UNAUTHENTICATED when it is missing, invalid, expired,
  // replayed, or was made for another method or request.
  absl::StatusOr<Caller> Verify(const grpc::ServerContext& ctx, absl::string_view method,
                                const google::protobuf::Message& request) const;

  // What a call's credential must carry: the method and a digest of the request.
  static std::string Payload(absl::string_view method, const google::protobuf::Message& request);
  // The credential itself, for callers that are not gRPC (tests).
  absl::StatusOr<std::string> Encode(absl::string_view payload) const;
  absl::StatusOr<Caller> Decode(const std::string& credential, std::string* payload) const;

 private:
  MungeAuth(bool enabled, std::string socket) : enabled_(enabled), socket_(std::move(socket)) {}
  bool enabled_;
  std::string socket_;
};

// The metadata key that carries the credential.
inline constexpr char kMungeMetadataKey[] = "x-nexec-munge";

// Parses the --auth flag of the daemons: "munge" or "none".
absl::StatusOr<MungeAuth> MungeAuthFromFlags(const std::string& mode, const std::string& socket);

}  // namespace jc::nexec
