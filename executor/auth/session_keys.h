#pragma once

// Sessions over munge (issue 32 item 6): a caller proves who it is with one munge credential
// per peer, not one per call. That credential also carries the caller's half of an X25519
// key exchange; the peer answers with its half, and both derive a session key that no one
// else can (the munge credential, even if copied off the wire, gives only public values).
// Each later call carries the session's id, a counter and an HMAC-SHA256 of (id, counter,
// method and request digest) under that key: a call cannot be forged without the key,
// moved onto another request, or replayed (the peer accepts each counter once).
//
// The pieces here are pure (no gRPC, no munge): MungeAuth puts them on the wire.

#include <sys/types.h>

#include <bitset>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace jc::nexec {

// The account a verified call comes from.
struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;  // the account's name on this host, or the uid as text when it has none
  bool root() const { return uid == 0; }
};

// How long a session lasts; the caller opens a new one before then.
inline constexpr absl::Duration kSessionLifetime = absl::Hours(1);

// One side's X25519 key pair for one exchange.
class KeyExchange {
 public:
  static absl::StatusOr<KeyExchange> Make();
  const std::string& public_hex() const { return public_hex_; }
  // The session key of `session_id`, from the other side's public key; `offering` says
  // whether this side is the caller (the two public keys enter in a fixed order).
  absl::StatusOr<std::string> SessionKey(absl::string_view peer_public_hex, absl::string_view session_id,
                                         bool offering) const;

 private:
  std::shared_ptr<void> key_;  // EVP_PKEY
  std::string public_hex_;
};

// The call's proof: HMAC-SHA256(key, id \n counter \n binding), hex.
std::string SessionMac(absl::string_view key, absl::string_view session_id, uint64_t counter,
                       absl::string_view binding);

// Which counters a session has seen: each is accepted once; one older than the last 4096
// is refused (calls in flight together may arrive out of order, not that far).
class ReplayWindow {
 public:
  bool Accept(uint64_t counter);

 private:
  static constexpr uint64_t kWidth = 4096;
  uint64_t highest_ = 0;
  std::bitset<kWidth> seen_;  // bit (c % kWidth) for counters in (highest_ - kWidth, highest_]
};

// The peer's side: sessions opened by verified callers.
class SessionTable {
 public:
  explicit SessionTable(size_t capacity = 65536) : capacity_(capacity) {}
  struct Opened {
    std::string id;
    std::string public_hex;  // this side's half, for the caller
  };
  // A session for `caller`, who offered `caller_public_hex` inside its munge credential.
  absl::StatusOr<Opened> Open(const Caller& caller, absl::string_view caller_public_hex, absl::Time now);
  // The caller of a call that carries (id, counter, mac) for `binding`; UNAUTHENTICATED,
  // with a message starting "nexec session", when the session is unknown (the peer
  // restarted), expired, or the call is forged or replayed.
  absl::StatusOr<Caller> Check(absl::string_view id, uint64_t counter, absl::string_view mac_hex,
                               absl::string_view binding, absl::Time now);
  size_t size() const;

 private:
  struct Session {
    std::string key;
    Caller caller;
    absl::Time expires;
    ReplayWindow window;
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<std::string, Session> sessions_;
  std::deque<std::string> order_;  // ids by opening, oldest first: the first to go when full
};

// The caller's side: the session held with each peer (by address).
class ClientSessions {
 public:
  struct Use {
    std::string id;
    uint64_t counter = 0;
    std::string mac;
  };
  // A session's proof for a call to `peer`, or nullopt when there is none (yet).
  std::optional<Use> Sign(const std::string& peer, absl::string_view binding, absl::Time now);
  // Whether this call should offer a session to `peer` (none held, none being offered).
  bool ShouldOffer(const std::string& peer, absl::Time now);
  // The peer's answer to an offer; `accepted` false: it took none (the offer may be made again).
  void Settle(const std::string& peer, const KeyExchange* offer, absl::string_view accept_metadata, absl::Time now);
  // The peer forgot the session (restarted) or refused it: the next call offers again.
  void Forget(const std::string& peer, absl::string_view id);

 private:
  struct Held {
    std::string id;
    std::string key;
    absl::Time expires;
    uint64_t next_counter = 1;
  };
  std::mutex mu_;
  std::map<std::string, Held> held_;
  std::map<std::string, absl::Time> offering_;  // peers with an offer in flight, since when
};

}  // namespace jc::nexec
