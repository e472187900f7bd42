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

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "executor/auth/session_keys.h"

#include "absl/status/statusor.h"

namespace google::protobuf {
class Message;
}
namespace grpc {
class ClientContext;
class ServerContext;
class ServerContextBase;
class Status;
}  // namespace grpc

namespace jc::nexec {

class MungeAuth {
 public:
  // Signs and verifies with the munged listening on `socket`; empty means
  // $NEXEC_MUNGE_SOCKET when set, else libmunge's default socket.
  static MungeAuth Munge(std::string socket);
  // Development only (--auth=none): signs nothing and trusts every call as root.
  static MungeAuth Disabled();

  bool enabled() const { return enabled_; }
  const std::string& socket() const { return socket_; }

  // Adds a munge credential for `method` and `request` to the call: for one-off callers
  // (the CLI) and streams.
  absl::Status Sign(grpc::ClientContext* ctx, absl::string_view method,
                    const google::protobuf::Message& request) const;
  // One unary call to `peer` (its address), made by `call` on the context given to it
  // (deadline `timeout`), signed with the session held with that peer (session_keys.h), or
  // with a munge credential that offers one when there is none yet. A call the peer refuses
  // because it no longer knows the session (it restarted) is made once more with munge:
  // the refusal came before the peer acted on it.
  //
  // With `answer_from`, the answer counts only when the peer proved it (issue 47: whoever
  // listens at a master's address while it is down must not be believed): the session's
  // acceptance carried a munge credential of root or one of `answer_from->uids`, and the
  // answer `answer_from->response` carries the session's proof (AnswerSigner). Otherwise
  // UNAUTHENTICATED, saying the answer was ignored; the caller must act on nothing in it.
  // A refusal counts only when proven the same way (its code and message signed): one that
  // is not becomes UNAVAILABLE, "… not proven …; ignored", so that callers retry or try
  // another master rather than act on it. UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED and
  // UNAUTHENTICATED (which say "not here, not now" and are acted on by no one) pass as
  // they are.
  struct AnswerFrom {
    const google::protobuf::Message* response = nullptr;
    std::vector<uid_t> uids;  // the peer's accounts besides root
    std::string role = "the nexec master";  // for the message
  };
  grpc::Status Call(const std::string& peer, absl::string_view method, const google::protobuf::Message& request,
                    std::chrono::milliseconds timeout, const std::function<grpc::Status(grpc::ClientContext*)>& call,
                    const AnswerFrom* answer_from = nullptr) const;
  // Checks the call's session signature or munge credential: UNAUTHENTICATED when it is
  // missing, invalid, expired, replayed, or was made for another method or request. A
  // credential that offers a session opens one; the answer says so in its metadata.
  absl::StatusOr<Caller> Verify(grpc::ServerContextBase* ctx, absl::string_view method,
                                const google::protobuf::Message& request) const;

  // Whether a call carries a session signature or a munge credential (calls anyone may
  // make are verified when they do).
  static bool CarriesCredential(const grpc::ServerContextBase* ctx);
  // The proof for `answer`, the answer to `caller`'s call, when it came in a session
  // (Caller::session); NotFound when it did not (nothing to sign with) or the session is gone.
  absl::StatusOr<std::string> AnswerProof(const Caller& caller, const google::protobuf::Message& answer) const;
  // The proof for a refusal (`code`, `message`) of `caller`'s call in a session.
  absl::StatusOr<std::string> StatusProof(const Caller& caller, int code, absl::string_view message) const;
  // What a refusal's proof is over, in place of an answer's digest.
  static std::string StatusDigest(int code, absl::string_view message);
  // Puts that proof in the call's trailing metadata (nothing when there is none): for
  // handlers the AnswerSigner interceptor does not cover (generic services).
  void SignAnswer(grpc::ServerContextBase* ctx, const Caller& caller, const google::protobuf::Message& answer) const;
  // A digest of an answer's bytes, written deterministically (what the proof is over).
  static std::string AnswerDigest(const google::protobuf::Message& answer);

  // A bidi stream's caller, proven before its first message is read (a synchronous
  // handler holds a thread while it waits for it: only a proven caller may make it wait):
  // the munge credential in the call's metadata, decoded now (sessions are for unary
  // calls), and what it was made for, which CheckBinding compares with the first message
  // once it came. UNAUTHENTICATED without a valid credential.
  struct StreamOpening {
    Caller caller;
    std::string payload;
    bool any = false;  // --auth=none: every message stands
  };
  absl::StatusOr<StreamOpening> VerifyStreamOpening(grpc::ServerContextBase* ctx) const;
  static absl::Status CheckBinding(const StreamOpening& opening, absl::string_view method,
                                   const google::protobuf::Message& first);

  // Munge credentials this object made (sessions make few: tests and benchmarks read it).
  int64_t credentials_made() const;
  // Sessions callers hold with this side.
  size_t sessions_open() const;

  // What a call's credential must carry: the method and a digest of the request.
  static std::string Payload(absl::string_view method, const google::protobuf::Message& request);
  // The credential itself, for callers that are not gRPC (tests).
  absl::StatusOr<std::string> Encode(absl::string_view payload) const;
  absl::StatusOr<Caller> Decode(const std::string& credential, std::string* payload) const;

 private:
  struct State;
  MungeAuth(bool enabled, std::string socket);
  // The session an offer opened, from the peer's acceptance (proven when it carries the
  // peer's munge credential over the exchange).
  std::optional<ClientSessions::Use> SettleOffer(const std::string& peer, const KeyExchange& offer,
                                                 const grpc::ClientContext& ctx) const;
  // What the call's `status` and answer come to once checked (see Call).
  grpc::Status CheckAnswer(const std::string& peer, const grpc::ClientContext& ctx,
                           const std::optional<ClientSessions::Use>& use, const AnswerFrom& from,
                           const grpc::Status& status) const;
  bool enabled_;
  std::string socket_;
  std::shared_ptr<State> state_;  // shared by copies: the sessions of this process
};

// The metadata key that carries the credential.
inline constexpr char kMungeMetadataKey[] = "x-nexec-munge";
// A session call: "<session id> <counter> <hmac hex>".
inline constexpr char kSessionMetadataKey[] = "x-nexec-session";
// The answer to an offer (initial metadata): "<session id> <public key hex> <munge
// credential of the answering side over kSessionAcceptPayload...>".
inline constexpr char kSessionAcceptMetadataKey[] = "x-nexec-session-accept";
// The proof of an answer in a session (trailing metadata): the AnswerMac, hex.
inline constexpr char kAnswerMetadataKey[] = "x-nexec-answer";
// What the answering side's munge credential in an acceptance carries, before
// "<session id>\n<its public half>\n<the caller's offered half>".
inline constexpr char kSessionAcceptPayload[] = "nexec-accept\n";
// What a munge payload that offers a session adds to the call's binding.
inline constexpr char kSessionOfferLine[] = "\noffer ";

// Parses the --auth flag of the daemons: "munge" or "none".
absl::StatusOr<MungeAuth> MungeAuthFromFlags(const std::string& mode, const std::string& socket);

}  // namespace jc::nexec
