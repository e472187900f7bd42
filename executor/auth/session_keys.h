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
  // The session the call came in ("" when none: a munge credential alone) and its counter
  // (0: the call that opened it). The answer is signed under it (SessionTable::AnswerMac).
  std::string session;
  uint64_t counter = 0;
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

// The answer's proof (issue 47: a client acts only on answers the peer it meant signed):
// HMAC-SHA256(key, id \n counter \n "answer" \n digest of the answer), hex. The id and
// counter are the call's: an answer cannot be moved onto another call, nor made without
// the key.
std::string AnswerMac(absl::string_view key, absl::string_view session_id, uint64_t counter,
                      absl::string_view answer_digest);

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
  // `per_account`: the sessions one account other than root holds at most; past it, its
  // own oldest goes (one account's flood of offers evicts no one else's: attacker
  // helper-41 filled the whole table from one account in under a minute).
  explicit SessionTable(size_t capacity = 65536, size_t per_account = 1024)
      : capacity_(capacity), per_account_(per_account) {}
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
  // The proof for the answer to call `counter` of session `id` (Caller::session/counter);
  // NotFound when this side no longer holds the session.
  absl::StatusOr<std::string> AnswerMac(absl::string_view id, uint64_t counter, absl::string_view answer_digest) const;
  size_t size() const;

 private:
  struct Session {
    std::string key;
    Caller caller;
    absl::Time expires;
    ReplayWindow window;
  };
  const size_t capacity_;
  const size_t per_account_;
  mutable std::mutex mu_;
  std::map<std::string, Session> sessions_;
  std::map<uid_t, std::deque<std::string>> by_account_;  // non-root accounts' ids, oldest first (some gone)
  std::deque<std::string> order_;  // ids by opening, oldest first: the first to go when full
};

// The caller's side: the session held with each peer (by address).
class ClientSessions {
 public:
  struct Use {
    std::string id;
    uint64_t counter = 0;
    std::string mac;
    std::string key;               // to check the answer with (CheckAnswer)
    std::optional<Caller> proven;  // who signed the session's acceptance (none: nobody proved it)
  };
  // A session's proof for a call to `peer`, or nullopt when there is none (yet).
  std::optional<Use> Sign(const std::string& peer, absl::string_view binding, absl::Time now);
  // Whether this call should offer a session to `peer` (none held, none being offered).
  bool ShouldOffer(const std::string& peer, absl::Time now);
  // The peer's answer to an offer: `session_id` and its half of the exchange (both empty: it
  // took none, and the offer may be made again). `proven` is the account that signed the
  // acceptance (MungeAuth checks it): answers in the session are then that account's. The
  // session as this call used it (counter 0), when one was opened.
  std::optional<Use> Settle(const std::string& peer, const KeyExchange* offer, absl::string_view session_id,
                            absl::string_view peer_public_hex, std::optional<Caller> proven, absl::Time now);
  // The account that signed the answer to the call made with `use`, when `mac_hex` is the
  // session's proof of `answer_digest`; UNAUTHENTICATED otherwise (a session whose
  // acceptance nobody proved, an answer not signed, or forged, or made for another call).
  static absl::StatusOr<Caller> CheckAnswer(const Use& use, absl::string_view answer_digest, absl::string_view mac_hex);
  // The peer forgot the session (restarted) or refused it: the next call offers again.
  void Forget(const std::string& peer, absl::string_view id);

 private:
  struct Held {
    std::string id;
    std::string key;
    absl::Time expires;
    uint64_t next_counter = 1;
    std::optional<Caller> proven;  // who signed the acceptance
  };
  std::mutex mu_;
  std::map<std::string, Held> held_;
  std::map<std::string, absl::Time> offering_;  // peers with an offer in flight, since when
};

}  // namespace jc::nexec
