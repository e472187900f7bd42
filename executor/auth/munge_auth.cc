#include "executor/auth/munge_auth.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <munge.h>
#include <openssl/evp.h>
#include <pwd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/sha256_md.h"

namespace jc::nexec {
namespace {

struct CtxDeleter {
  void operator()(munge_ctx_t c) const { munge_ctx_destroy(c); }
};
using Ctx = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, CtxDeleter>;

absl::StatusOr<Ctx> MakeCtx(const std::string& socket) {
  Ctx ctx(munge_ctx_create());
  if (!ctx) return absl::ResourceExhaustedError("cannot create a munge context");
  if (!socket.empty() && munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat("bad munge socket ", socket));
  }
  return ctx;
}

std::string UserName(uid_t uid) {
  passwd pw;
  passwd* out = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &out) == 0 && out != nullptr) return out->pw_name;
  return std::to_string(uid);
}

// SHA-256 of a message's bytes, written deterministically so that both ends agree whatever
// order map fields were set in; hex.
std::string DigestOf(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, Sha256Md(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest), size));
}

// What a credential is bound to: the method and a digest of the request.
std::string BindingOf(absl::string_view method, const google::protobuf::Message& request) {
  return absl::StrCat(method, "\n", DigestOf(request));
}

std::string AcceptPayload(absl::string_view id, absl::string_view public_hex, absl::string_view offered_hex) {
  return absl::StrCat(kSessionAcceptPayload, id, "\n", public_hex, "\n", offered_hex);
}

}  // namespace

std::string MungeAuth::Payload(absl::string_view method, const google::protobuf::Message& request) {
  return BindingOf(method, request);
}

std::string MungeAuth::AnswerDigest(const google::protobuf::Message& answer) { return DigestOf(answer); }

struct MungeAuth::State {
  SessionTable sessions;   // callers' sessions with this side
  ClientSessions held;     // this side's sessions with its peers
  std::atomic<int64_t> credentials{0};
};

MungeAuth::MungeAuth(bool enabled, std::string socket)
    : enabled_(enabled), socket_(std::move(socket)), state_(std::make_shared<State>()) {}

int64_t MungeAuth::credentials_made() const { return state_->credentials.load(); }
size_t MungeAuth::sessions_open() const { return state_->sessions.size(); }

MungeAuth MungeAuth::Munge(std::string socket) {
  if (socket.empty()) {
    if (const char* env = std::getenv("NEXEC_MUNGE_SOCKET"); env != nullptr) socket = env;
  }
  return MungeAuth(true, std::move(socket));
}

MungeAuth MungeAuth::Disabled() { return MungeAuth(false, ""); }

absl::StatusOr<std::string> MungeAuth::Encode(absl::string_view payload) const {
  auto ctx = MakeCtx(socket_);
  if (!ctx.ok()) return ctx.status();
  char* cred = nullptr;
  munge_err_t e = munge_encode(&cred, ctx->get(), payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    std::string why = munge_ctx_strerror(ctx->get()) ? munge_ctx_strerror(ctx->get()) : munge_strerror(e);
    return absl::UnavailableError(absl::StrCat("cannot get a munge credential (", why,
                                               "); is munged running", socket_.empty() ? "" : " at ",
                                               socket_, "?"));
  }
  std::string out(cred);
  std::free(cred);
  state_->credentials.fetch_add(1);
  return out;
}

absl::StatusOr<Caller> MungeAuth::Decode(const std::string& credential, std::string* payload) const {
  auto ctx = MakeCtx(socket_);
  if (!ctx.ok()) return ctx.status();
  void* buf = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t e = munge_decode(credential.c_str(), ctx->get(), &buf, &len, &uid, &gid);
  std::string data = buf != nullptr ? std::string(static_cast<char*>(buf), static_cast<size_t>(len)) : "";
  std::free(buf);
  if (e == EMUNGE_SOCKET) {
    return absl::UnavailableError(absl::StrCat("cannot reach munged to check the caller's credential (",
                                               munge_strerror(e), ")"));
  }
  if (e != EMUNGE_SUCCESS) {
    return absl::UnauthenticatedError(absl::StrCat("the munge credential is not accepted: ", munge_strerror(e)));
  }
  if (payload != nullptr) *payload = std::move(data);
  return Caller{uid, gid, UserName(uid)};
}

absl::Status MungeAuth::Sign(grpc::ClientContext* ctx, absl::string_view method,
                             const google::protobuf::Message& request) const {
  if (!enabled_) return absl::OkStatus();
  auto cred = Encode(MungeAuth::Payload(method, request));
  if (!cred.ok()) return cred.status();
  ctx->AddMetadata(kMungeMetadataKey, *cred);
  return absl::OkStatus();
}

grpc::Status MungeAuth::Call(const std::string& peer, absl::string_view method,
                             const google::protobuf::Message& request, std::chrono::milliseconds timeout,
                             const std::function<grpc::Status(grpc::ClientContext*)>& call,
                             const AnswerFrom* answer_from) const {
  const std::string binding = enabled_ ? MungeAuth::Payload(method, request) : "";
  for (int attempt = 0;; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    if (!enabled_) return call(&ctx);
    const absl::Time now = absl::Now();
    std::optional<ClientSessions::Use> use = state_->held.Sign(peer, binding, now);
    if (use && answer_from != nullptr && !use->proven) {
      // Held from calls that did not ask (its acceptance unproven): proven anew.
      state_->held.Forget(peer, use->id);
      use.reset();
    }
    std::optional<KeyExchange> offer;
    if (use) {
      ctx.AddMetadata(kSessionMetadataKey, absl::StrCat(use->id, " ", use->counter, " ", use->mac));
    } else {
      std::string payload = binding;
      // A call whose answer must be proven needs a session: it offers one whatever else is
      // in flight.
      if (state_->held.ShouldOffer(peer, now) || answer_from != nullptr) {
        auto made = KeyExchange::Make();
        if (made.ok()) {
          offer = std::move(*made);
          absl::StrAppend(&payload, kSessionOfferLine, offer->public_hex());
        }
      }
      auto cred = Encode(payload);
      if (!cred.ok()) {
        if (offer) state_->held.Settle(peer, nullptr, "", "", std::nullopt, now);
        return ToGrpcStatus(cred.status());
      }
      ctx.AddMetadata(kMungeMetadataKey, *cred);
    }
    grpc::Status status = call(&ctx);
    if (offer) use = SettleOffer(peer, *offer, ctx);
    if (use && status.error_code() == grpc::StatusCode::UNAUTHENTICATED &&
        absl::StartsWith(status.error_message(), "nexec session: ")) {
      state_->held.Forget(peer, use->id);
      if (attempt == 0) continue;  // refused before the peer acted on it: once more, with munge
    }
    if (answer_from == nullptr) return status;
    return CheckAnswer(peer, ctx, use, *answer_from, status);
  }
}

std::optional<ClientSessions::Use> MungeAuth::SettleOffer(const std::string& peer, const KeyExchange& offer,
                                                          const grpc::ClientContext& ctx) const {
  std::string accepted;
  const auto& md = ctx.GetServerInitialMetadata();
  if (auto it = md.find(kSessionAcceptMetadataKey); it != md.end()) accepted.assign(it->second.data(), it->second.size());
  std::vector<std::string> f = absl::StrSplit(accepted, ' ');
  if (f.size() < 2) {
    state_->held.Settle(peer, nullptr, "", "", std::nullopt, absl::Now());
    return std::nullopt;
  }
  // Who accepted: the answering side's own munge credential over this very exchange. A
  // process squatting on the peer's address can make one only as its own account.
  std::optional<Caller> proven;
  if (f.size() == 3) {
    std::string payload;
    auto signer = Decode(f[2], &payload);
    if (signer.ok() && payload == AcceptPayload(f[0], f[1], offer.public_hex())) proven = *signer;
  }
  return state_->held.Settle(peer, &offer, f[0], f[1], std::move(proven), absl::Now());
}

grpc::Status MungeAuth::CheckAnswer(const std::string& peer, const grpc::ClientContext& ctx,
                                    const std::optional<ClientSessions::Use>& use, const AnswerFrom& from,
                                    const grpc::Status& status) const {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return status;  // "not here, not now": retried or tried elsewhere, acted on by no one
    default:
      break;
  }
  auto ignored = [&](absl::string_view why) {
    std::string accounts = "root";
    for (uid_t uid : from.uids) absl::StrAppend(&accounts, " or uid ", uid);
    if (status.ok()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          absl::StrCat("the answer from ", peer, " is not proven to come from ", from.role, " (",
                                       accounts, "): ", why, "; it was ignored"));
    }
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("a refusal from ", peer, " (", status.error_message(),
                                     ") is not proven to come from ", from.role, " (", accounts, "): ", why,
                                     "; it was ignored"));
  };
  if (!use) return ignored("the peer holds no session with this caller");
  std::string mac;
  const auto& trailers = ctx.GetServerTrailingMetadata();
  if (auto it = trailers.find(kAnswerMetadataKey); it != trailers.end()) mac.assign(it->second.data(), it->second.size());
  const std::string digest = status.ok() ? AnswerDigest(*from.response)
                                         : StatusDigest(status.error_code(), status.error_message());
  auto signer = ClientSessions::CheckAnswer(*use, digest, mac);
  if (!signer.ok()) return ignored(signer.status().message());
  if (!signer->root() && std::find(from.uids.begin(), from.uids.end(), signer->uid) == from.uids.end()) {
    return ignored(absl::StrCat("it was signed by ", signer->user, " (uid ", signer->uid, ")"));
  }
  return status;
}

absl::StatusOr<Caller> MungeAuth::Verify(grpc::ServerContextBase* ctx, absl::string_view method,
                                         const google::protobuf::Message& request) const {
  if (!enabled_) return Caller{0, 0, "root"};
  const auto& md = ctx->client_metadata();
  if (auto session = md.find(kSessionMetadataKey); session != md.end()) {
    std::vector<absl::string_view> f = absl::StrSplit(absl::string_view(session->second.data(), session->second.size()), ' ');
    uint64_t counter = 0;
    if (f.size() != 3 || !absl::SimpleAtoi(f[1], &counter)) {
      return absl::UnauthenticatedError("nexec session: the call's session metadata is malformed");
    }
    return state_->sessions.Check(f[0], counter, f[2], MungeAuth::Payload(method, request), absl::Now());
  }
  auto it = md.find(kMungeMetadataKey);
  if (it == md.end()) {
    return absl::UnauthenticatedError(
        "the call carries no munge credential (nexec proves who you are with munge; is munged running "
        "on your host, with the cluster's key?)");
  }
  std::string payload;
  auto caller = Decode(std::string(it->second.data(), it->second.size()), &payload);
  if (!caller.ok()) return caller.status();
  const std::string binding = MungeAuth::Payload(method, request);
  if (payload == binding) return caller;
  const std::string offer_prefix = binding + kSessionOfferLine;
  if (!absl::StartsWith(payload, offer_prefix)) {
    return absl::UnauthenticatedError("the munge credential was made for another request");
  }
  // The credential proves the caller and carries its half of the exchange: a session for it.
  const absl::string_view offered = absl::string_view(payload).substr(offer_prefix.size());
  auto opened = state_->sessions.Open(*caller, offered, absl::Now());
  if (opened.ok()) {
    // This side proves itself in turn: its own credential over both halves, so that the
    // caller knows whose answers the session's proofs are (one credential a session).
    auto accept = Encode(AcceptPayload(opened->id, opened->public_hex, offered));
    ctx->AddInitialMetadata(kSessionAcceptMetadataKey,
                            absl::StrCat(opened->id, " ", opened->public_hex, accept.ok() ? " " : "",
                                         accept.ok() ? *accept : ""));
    caller->session = opened->id;
    caller->counter = 0;
  }
  return caller;  // the call itself stands on its munge credential, session or not
}

bool MungeAuth::CarriesCredential(const grpc::ServerContextBase* ctx) {
  const auto& md = ctx->client_metadata();
  return md.find(kSessionMetadataKey) != md.end() || md.find(kMungeMetadataKey) != md.end();
}

absl::StatusOr<std::string> MungeAuth::AnswerProof(const Caller& caller, const google::protobuf::Message& answer) const {
  if (!enabled_ || caller.session.empty()) return absl::NotFoundError("the call came in no session");
  return state_->sessions.AnswerMac(caller.session, caller.counter, AnswerDigest(answer));
}

std::string MungeAuth::StatusDigest(int code, absl::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  const std::string text = absl::StrCat("status\n", code, "\n", message);
  EVP_Digest(text.data(), text.size(), digest, &size, Sha256Md(), nullptr);
  return absl::StrCat("status:", absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest), size)));
}

absl::StatusOr<std::string> MungeAuth::StatusProof(const Caller& caller, int code, absl::string_view message) const {
  if (!enabled_ || caller.session.empty()) return absl::NotFoundError("the call came in no session");
  return state_->sessions.AnswerMac(caller.session, caller.counter, StatusDigest(code, message));
}

void MungeAuth::SignAnswer(grpc::ServerContextBase* ctx, const Caller& caller,
                           const google::protobuf::Message& answer) const {
  auto proof = AnswerProof(caller, answer);
  if (proof.ok()) ctx->AddTrailingMetadata(kAnswerMetadataKey, *proof);
}

absl::StatusOr<MungeAuth::StreamOpening> MungeAuth::VerifyStreamOpening(grpc::ServerContextBase* ctx) const {
  StreamOpening out;
  if (!enabled_) {
    out.caller = Caller{0, 0, "root"};
    out.any = true;
    return out;
  }
  const auto& md = ctx->client_metadata();
  auto it = md.find(kMungeMetadataKey);
  if (it == md.end()) {
    return absl::UnauthenticatedError(
        "the stream carries no munge credential (nexec proves who you are with munge; is munged running on your "
        "host, with the cluster's key?)");
  }
  auto caller = Decode(std::string(it->second.data(), it->second.size()), &out.payload);
  if (!caller.ok()) return caller.status();
  out.caller = *caller;
  return out;
}

absl::Status MungeAuth::CheckBinding(const StreamOpening& opening, absl::string_view method,
                                     const google::protobuf::Message& first) {
  if (opening.any || opening.payload == MungeAuth::Payload(method, first)) return absl::OkStatus();
  return absl::UnauthenticatedError("the munge credential was made for another request");
}

absl::StatusOr<MungeAuth> MungeAuthFromFlags(const std::string& mode, const std::string& socket) {
  if (mode == "munge") return MungeAuth::Munge(socket);
  if (mode == "none") return MungeAuth::Disabled();
  return absl::InvalidArgumentError(absl::StrCat("--auth must be munge or none, got \"", mode, "\""));
}

}  // namespace jc::nexec
