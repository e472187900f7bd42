#include "executor/auth/stream_session.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace jc::nexec {
namespace {

namespace pb = ::nexec::v1;

// What each opening's credential is made for (MungeAuth::Payload: these words and a digest
// of the message): a hello's cannot pass for a welcome, nor either for a unary call's.
constexpr char kHelloMethod[] = "AgentStream.hello";
constexpr char kWelcomeMethod[] = "AgentStream.welcome";

absl::StatusOr<std::string> NewSessionId() {
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof(raw)) != 1) return absl::InternalError("no random bytes for a stream's session id");
  return "s" + absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(raw), sizeof(raw)));
}

absl::StatusOr<pb::AgentStreamMessage> Parsed(const pb::AgentStreamFrame& frame) {
  pb::AgentStreamMessage m;
  if (!m.ParseFromString(frame.body())) return absl::UnauthenticatedError("the agent stream's frame does not parse");
  return m;
}

// The opening's signer, checked against what the opening says.
absl::StatusOr<Caller> SignedOver(const MungeAuth& auth, const pb::AgentStreamFrame& frame, const char* method,
                                  const google::protobuf::Message& said) {
  if (frame.credential().empty()) {
    return absl::UnauthenticatedError(absl::StrCat("the agent stream's ", method, " carries no munge credential"));
  }
  std::string payload;
  auto caller = auth.Decode(frame.credential(), &payload);
  if (!caller.ok()) return caller.status();
  if (payload != MungeAuth::Payload(method, said)) {
    return absl::UnauthenticatedError(
        absl::StrCat("the agent stream's ", method, " is not what its munge credential was made for"));
  }
  return caller;
}

}  // namespace

StreamSealer StreamSealer::Unsigned(bool agent_side) { return StreamSealer("", "", agent_side, false); }

StreamSealer StreamSealer::Keyed(std::string session, std::string key, bool agent_side) {
  return StreamSealer(std::move(session), std::move(key), agent_side, true);
}

std::string StreamSealer::Mac(bool from_agent, uint64_t counter, const std::string& body) const {
  return SessionMac(key_, session_, counter,
                    absl::StrCat(from_agent ? "agent stream up\n" : "agent stream down\n", body));
}

pb::AgentStreamFrame StreamSealer::Seal(const pb::AgentStreamMessage& message) {
  pb::AgentStreamFrame frame;
  frame.set_counter(++sent_);
  message.SerializeToString(frame.mutable_body());
  if (keyed_) frame.set_mac(Mac(agent_side_, frame.counter(), frame.body()));
  return frame;
}

absl::StatusOr<pb::AgentStreamMessage> StreamSealer::Open(const pb::AgentStreamFrame& frame) {
  if (frame.counter() != received_ + 1) {
    return absl::UnauthenticatedError(absl::StrCat("the agent stream's frame ", frame.counter(), " came where frame ",
                                                   received_ + 1, " was due (replayed, dropped or reordered)"));
  }
  if (keyed_) {
    // The other side's direction: a frame of this side's, sent back, does not hold.
    const std::string want = Mac(!agent_side_, frame.counter(), frame.body());
    if (want.size() != frame.mac().size() || CRYPTO_memcmp(want.data(), frame.mac().data(), want.size()) != 0) {
      return absl::UnauthenticatedError("the agent stream's frame does not carry the session's proof");
    }
  }
  auto m = Parsed(frame);
  if (!m.ok()) return m.status();
  if (m->has_hello() || m->has_welcome()) {
    return absl::UnauthenticatedError("the agent stream was opened already");
  }
  ++received_;
  return m;
}

absl::StatusOr<AgentStreamOpening> OpenAgentStream(const MungeAuth& auth, const std::string& host) {
  auto offer = KeyExchange::Make();
  if (!offer.ok()) return offer.status();
  pb::AgentStreamMessage m;
  m.mutable_hello()->set_host(host);
  m.mutable_hello()->set_offer(offer->public_hex());
  AgentStreamOpening opening{{}, offer->public_hex(), std::move(*offer)};
  m.SerializeToString(opening.frame.mutable_body());
  if (auth.enabled()) {
    auto credential = auth.Encode(MungeAuth::Payload(kHelloMethod, m.hello()));
    if (!credential.ok()) return credential.status();
    opening.frame.set_credential(*credential);
  }
  return opening;
}

absl::StatusOr<AcceptedAgentStream> AcceptAgentStream(const MungeAuth& auth, const pb::AgentStreamFrame& hello_frame,
                                                      uid_t agent_uid, const std::string& identity, int64_t term) {
  auto m = Parsed(hello_frame);
  if (!m.ok()) return m.status();
  if (hello_frame.counter() != 0 || !m->has_hello()) {
    return absl::UnauthenticatedError("the agent stream opens with the agent's hello");
  }
  const pb::AgentStreamHello& hello = m->hello();
  AcceptedAgentStream accepted;
  accepted.host = hello.host();
  pb::AgentStreamMessage answer;
  pb::AgentStreamWelcome* welcome = answer.mutable_welcome();
  welcome->set_identity(identity);
  welcome->set_term(term);
  welcome->set_agent_offer(hello.offer());
  if (!auth.enabled()) {
    accepted.caller = Caller{0, 0, "root"};
    answer.SerializeToString(accepted.welcome.mutable_body());
    accepted.sealer = StreamSealer::Unsigned(false);
    return accepted;
  }
  auto caller = SignedOver(auth, hello_frame, kHelloMethod, hello);
  if (!caller.ok()) return caller.status();
  // As a heartbeat: a stream makes a host schedulable and takes launches as anyone there.
  if (!caller->root() && caller->uid != agent_uid) {
    return absl::PermissionDeniedError(absl::StrCat("agent streams come from nexec agents, not from ", caller->user));
  }
  accepted.caller = *caller;
  auto session = NewSessionId();
  if (!session.ok()) return session.status();
  auto mine = KeyExchange::Make();
  if (!mine.ok()) return mine.status();
  auto key = mine->SessionKey(hello.offer(), *session, /*offering=*/false);
  if (!key.ok()) return absl::UnauthenticatedError(absl::StrCat("the agent stream's hello: ", key.status().message()));
  welcome->set_session(*session);
  welcome->set_offer(mine->public_hex());
  answer.SerializeToString(accepted.welcome.mutable_body());
  auto credential = auth.Encode(MungeAuth::Payload(kWelcomeMethod, *welcome));
  if (!credential.ok()) return credential.status();
  accepted.welcome.set_credential(*credential);
  accepted.sealer = StreamSealer::Keyed(*session, std::move(*key), /*agent_side=*/false);
  return accepted;
}

absl::StatusOr<StreamSealer> CheckWelcome(const MungeAuth& auth, const AgentStreamOpening& opening,
                                          const pb::AgentStreamFrame& frame, const std::vector<uid_t>& master_uids,
                                          pb::AgentStreamWelcome* welcome) {
  auto m = Parsed(frame);
  if (!m.ok()) return m.status();
  if (frame.counter() != 0 || !m->has_welcome()) {
    return absl::UnauthenticatedError("the nexec master's first frame on the agent stream is not its welcome");
  }
  *welcome = m->welcome();
  if (welcome->agent_offer() != opening.offer_public_hex) {
    return absl::UnauthenticatedError("the welcome on the agent stream answers another agent's hello");
  }
  if (!auth.enabled()) return StreamSealer::Unsigned(true);
  auto signer = SignedOver(auth, frame, kWelcomeMethod, *welcome);
  if (!signer.ok()) return signer.status();
  if (!signer->root() && std::find(master_uids.begin(), master_uids.end(), signer->uid) == master_uids.end()) {
    return absl::UnauthenticatedError(absl::StrCat("the welcome on the agent stream is signed by ", signer->user,
                                                   ", not by the nexec master's account: it is not proven to come "
                                                   "from the nexec master"));
  }
  auto key = opening.offer.SessionKey(welcome->offer(), welcome->session(), /*offering=*/true);
  if (!key.ok()) return absl::UnauthenticatedError(absl::StrCat("the agent stream's welcome: ", key.status().message()));
  return StreamSealer::Keyed(welcome->session(), std::move(*key), /*agent_side=*/true);
}

}  // namespace jc::nexec
