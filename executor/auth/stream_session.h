#pragma once

// The proofs of the agents' stream (issue 48, Master.AgentStream): the agent opens it with
// a hello carrying its half of an X25519 exchange under its munge credential; the master
// answers with a welcome carrying its half, the hello's half echoed, under the master's
// munge credential; both derive the session's key (session_keys.h). Every later frame is
// sealed: its direction's next counter and an HMAC of (direction, counter, body) under
// that key. A frame is taken only with the next counter and a valid MAC of the other
// side's direction: it cannot be forged, altered, replayed, reflected back to its sender
// or moved to another stream. With --auth=none nothing is signed and every frame stands,
// as every call does then.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/auth/munge_auth.h"
#include "executor/auth/session_keys.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

// Seals this side's frames and opens the other side's, for one stream.
class StreamSealer {
 public:
  // --auth=none: no MAC made or asked for.
  static StreamSealer Unsigned(bool agent_side);
  static StreamSealer Keyed(std::string session, std::string key, bool agent_side);

  ::nexec::v1::AgentStreamFrame Seal(const ::nexec::v1::AgentStreamMessage& message);
  // The message of the other side's next frame; UNAUTHENTICATED for one out of order,
  // with a MAC that does not hold, or that does not parse.
  absl::StatusOr<::nexec::v1::AgentStreamMessage> Open(const ::nexec::v1::AgentStreamFrame& frame);

 private:
  StreamSealer(std::string session, std::string key, bool agent_side, bool keyed)
      : session_(std::move(session)), key_(std::move(key)), agent_side_(agent_side), keyed_(keyed) {}
  std::string Mac(bool from_agent, uint64_t counter, const std::string& body) const;
  std::string session_;
  std::string key_;
  bool agent_side_;
  bool keyed_;
  uint64_t sent_ = 0;
  uint64_t received_ = 0;
};

// The agent's opening: the hello frame to send, and the half of the exchange it offered.
struct AgentStreamOpening {
  ::nexec::v1::AgentStreamFrame frame;
  std::string offer_public_hex;
  KeyExchange offer;
};
absl::StatusOr<AgentStreamOpening> OpenAgentStream(const MungeAuth& auth, const std::string& host);

// The master's side of an opening: the hello's caller (who signed it) and host, the welcome
// frame to send, and the stream's sealer. UNAUTHENTICATED when the hello is not signed, or
// signed over something else; PERMISSION_DENIED when its signer is neither root nor
// `agent_uid` (judged before the master makes a credential of its own: a refused hello
// costs one munge decode).
struct AcceptedAgentStream {
  Caller caller;
  std::string host;
  ::nexec::v1::AgentStreamFrame welcome;
  StreamSealer sealer = StreamSealer::Unsigned(false);
};
absl::StatusOr<AcceptedAgentStream> AcceptAgentStream(const MungeAuth& auth, const ::nexec::v1::AgentStreamFrame& hello,
                                                      uid_t agent_uid, const std::string& identity, int64_t term);

// The agent's check of the welcome: signed by root or one of `master_uids`, over a welcome
// that echoes this opening's offer. UNAUTHENTICATED otherwise (whoever listens at a
// master's address while it is down cannot make one).
absl::StatusOr<StreamSealer> CheckWelcome(const MungeAuth& auth, const AgentStreamOpening& opening,
                                          const ::nexec::v1::AgentStreamFrame& frame,
                                          const std::vector<uid_t>& master_uids,
                                          ::nexec::v1::AgentStreamWelcome* welcome);

}  // namespace jc::nexec
