#include "executor/auth/session_keys.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/hmac_sha256.h"
#include "common/sha256_md.h"

namespace jc::nexec {
namespace {

std::string Hex(const unsigned char* data, size_t size) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(data), size));
}

absl::Status Unauthenticated(absl::string_view why) {
  return absl::UnauthenticatedError(absl::StrCat("nexec session: ", why));
}

}  // namespace

absl::StatusOr<KeyExchange> KeyExchange::Make() {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519");
  if (key == nullptr) return absl::InternalError("cannot make an X25519 key");
  KeyExchange k;
  k.key_ = std::shared_ptr<void>(key, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
  unsigned char pub[32];
  size_t size = sizeof(pub);
  if (EVP_PKEY_get_raw_public_key(key, pub, &size) != 1 || size != sizeof(pub)) {
    return absl::InternalError("cannot read an X25519 public key");
  }
  k.public_hex_ = Hex(pub, size);
  return k;
}

absl::StatusOr<std::string> KeyExchange::SessionKey(absl::string_view peer_public_hex, absl::string_view session_id,
                                                    bool offering) const {
  if (peer_public_hex.size() != 64 ||
      peer_public_hex.find_first_not_of("0123456789abcdef") != absl::string_view::npos) {
    return Unauthenticated("the other side's public key is not 32 bytes of hex");
  }
  const std::string peer_raw = absl::HexStringToBytes(peer_public_hex);
  EVP_PKEY* peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr,
                                               reinterpret_cast<const unsigned char*>(peer_raw.data()), 32);
  if (peer == nullptr) return Unauthenticated("the other side's public key is not an X25519 key");
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> peer_owner(peer, EVP_PKEY_free);
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new(static_cast<EVP_PKEY*>(key_.get()), nullptr), EVP_PKEY_CTX_free);
  unsigned char shared[32];
  size_t size = sizeof(shared);
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 || EVP_PKEY_derive_set_peer(ctx.get(), peer) != 1 ||
      EVP_PKEY_derive(ctx.get(), shared, &size) != 1 || size != sizeof(shared)) {
    return Unauthenticated("the key exchange failed");
  }
  // key = SHA-256(label, shared secret, the caller's half, the peer's half, session id)
  const std::string& caller_half = offering ? public_hex_ : std::string(peer_public_hex);
  const std::string peer_half = offering ? std::string(peer_public_hex) : public_hex_;
  std::string input = "nexec-session-v1";
  input.append(reinterpret_cast<const char*>(shared), size);
  absl::StrAppend(&input, caller_half, peer_half, session_id);
  OPENSSL_cleanse(shared, sizeof(shared));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  EVP_Digest(input.data(), input.size(), digest, &digest_size, Sha256Md(), nullptr);
  OPENSSL_cleanse(input.data(), input.size());
  return std::string(reinterpret_cast<const char*>(digest), digest_size);
}

std::string SessionMac(absl::string_view key, absl::string_view session_id, uint64_t counter,
                       absl::string_view binding) {
  const std::string data = absl::StrCat(session_id, "\n", counter, "\n", binding);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  size = HmacSha256(key, data, mac);
  return Hex(mac, size);
}

std::string AnswerMac(absl::string_view key, absl::string_view session_id, uint64_t counter,
                      absl::string_view answer_digest) {
  return SessionMac(key, session_id, counter, absl::StrCat("answer\n", answer_digest));
}

bool ReplayWindow::Accept(uint64_t counter) {
  if (counter == 0) return false;
  if (counter > highest_) {
    // Slide: the counters passed over were never seen.
    const uint64_t step = counter - highest_;
    if (step >= kWidth) {
      seen_.reset();
    } else {
      for (uint64_t c = highest_ + 1; c < counter; ++c) seen_.reset(c % kWidth);
    }
    highest_ = counter;
    seen_.set(counter % kWidth);
    return true;
  }
  if (highest_ - counter >= kWidth) return false;  // too old to tell: refused
  if (seen_.test(counter % kWidth)) return false;
  seen_.set(counter % kWidth);
  return true;
}

absl::StatusOr<SessionTable::Opened> SessionTable::Open(const Caller& caller, absl::string_view caller_public_hex,
                                                        absl::Time now) {
  auto mine = KeyExchange::Make();
  if (!mine.ok()) return mine.status();
  unsigned char raw_id[16];
  if (RAND_bytes(raw_id, sizeof(raw_id)) != 1) return absl::InternalError("no random bytes for a session id");
  Opened opened{Hex(raw_id, sizeof(raw_id)), mine->public_hex()};
  auto key = mine->SessionKey(caller_public_hex, opened.id, /*offering=*/false);
  if (!key.ok()) return key.status();
  std::lock_guard<std::mutex> lock(mu_);
  while (sessions_.size() >= capacity_ && !order_.empty()) {
    sessions_.erase(order_.front());
    order_.pop_front();
  }
  // Expired sessions leave with the oldest (they were opened first).
  while (!order_.empty()) {
    auto it = sessions_.find(order_.front());
    if (it != sessions_.end() && it->second.expires > now) break;
    if (it != sessions_.end()) sessions_.erase(it);
    order_.pop_front();
  }
  if (!caller.root()) {
    std::deque<std::string>& mine_held = by_account_[caller.uid];
    while (!mine_held.empty() && (sessions_.count(mine_held.front()) == 0 || mine_held.size() >= per_account_)) {
      sessions_.erase(mine_held.front());
      mine_held.pop_front();
    }
    mine_held.push_back(opened.id);
  }
  sessions_[opened.id] = Session{std::move(*key), caller, now + kSessionLifetime, {}};
  order_.push_back(opened.id);
  return opened;
}

absl::StatusOr<Caller> SessionTable::Check(absl::string_view id, uint64_t counter, absl::string_view mac_hex,
                                           absl::string_view binding, absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return Unauthenticated("unknown session (this side restarted, or it expired)");
  Session& s = it->second;
  if (s.expires <= now) return Unauthenticated("the session expired");
  const std::string want = SessionMac(s.key, id, counter, binding);
  if (want.size() != mac_hex.size() || CRYPTO_memcmp(want.data(), mac_hex.data(), want.size()) != 0) {
    return Unauthenticated("the call's signature does not match (forged, or made for another request)");
  }
  if (!s.window.Accept(counter)) return Unauthenticated("the call was replayed");
  Caller caller = s.caller;
  caller.session = std::string(id);
  caller.counter = counter;
  return caller;
}

absl::StatusOr<std::string> SessionTable::AnswerMac(absl::string_view id, uint64_t counter,
                                                    absl::string_view answer_digest) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return absl::NotFoundError("nexec session: no such session to sign an answer in");
  return jc::nexec::AnswerMac(it->second.key, id, counter, answer_digest);
}

size_t SessionTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

std::optional<ClientSessions::Use> ClientSessions::Sign(const std::string& peer, absl::string_view binding,
                                                         absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(peer);
  // Renewed a few minutes before the peer would refuse it.
  if (it == held_.end() || it->second.expires - absl::Minutes(5) <= now) return std::nullopt;
  Use use{it->second.id, it->second.next_counter++, "", it->second.key, it->second.proven};
  use.mac = SessionMac(it->second.key, use.id, use.counter, binding);
  return use;
}

bool ClientSessions::ShouldOffer(const std::string& peer, absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = offering_.find(peer);
  if (it != offering_.end() && now - it->second < absl::Seconds(30)) return false;  // one in flight
  offering_[peer] = now;
  return true;
}

std::optional<ClientSessions::Use> ClientSessions::Settle(const std::string& peer, const KeyExchange* offer,
                                                          absl::string_view session_id, absl::string_view peer_public_hex,
                                                          std::optional<Caller> proven, absl::Time now) {
  std::optional<Held> held;
  if (offer != nullptr && !session_id.empty()) {
    auto key = offer->SessionKey(peer_public_hex, session_id, /*offering=*/true);
    if (key.ok()) held = Held{std::string(session_id), std::move(*key), now + kSessionLifetime, 1, std::move(proven)};
  }
  std::lock_guard<std::mutex> lock(mu_);
  offering_.erase(peer);
  if (!held) return std::nullopt;
  Use used{held->id, 0, "", held->key, held->proven};
  held_[peer] = std::move(*held);
  return used;
}

absl::StatusOr<Caller> ClientSessions::CheckAnswer(const Use& use, absl::string_view answer_digest,
                                                   absl::string_view mac_hex) {
  if (!use.proven) return Unauthenticated("the peer's acceptance of the session carried no valid munge credential");
  const std::string want = jc::nexec::AnswerMac(use.key, use.id, use.counter, answer_digest);
  if (want.size() != mac_hex.size() || CRYPTO_memcmp(want.data(), mac_hex.data(), want.size()) != 0) {
    return Unauthenticated(mac_hex.empty() ? "the answer is not signed" : "the answer's signature does not match");
  }
  return *use.proven;
}

void ClientSessions::Forget(const std::string& peer, absl::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(peer);
  if (it != held_.end() && it->second.id == id) held_.erase(it);
}

}  // namespace jc::nexec
