// Sessions over munge (B9, issue 32 item 6): what a peer accepts once a caller proved itself.
#include "executor/auth/session_keys.h"

#include <catch2/catch.hpp>

namespace jc::nexec {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

// A caller's session with a table, as MungeAuth opens one: the offer, the answer, the key.
struct Opened {
  std::string id;
  std::string key;
};
Opened OpenFor(SessionTable& table, const Caller& caller) {
  auto offer = KeyExchange::Make();
  REQUIRE(offer.ok());
  auto opened = table.Open(caller, offer->public_hex(), kNow);
  REQUIRE(opened.ok());
  auto key = offer->SessionKey(opened->public_hex, opened->id, /*offering=*/true);
  REQUIRE(key.ok());
  return {opened->id, *key};
}

TEST_CASE("a session call proves the caller who opened the session, once per counter [B9][C6]") {
  SessionTable table;
  const Caller alice{1001, 1001, "alice"};
  Opened s = OpenFor(table, alice);
  const std::string binding = "Kill\nabc123";
  auto first = table.Check(s.id, 1, SessionMac(s.key, s.id, 1, binding), binding, kNow);
  REQUIRE(first.ok());
  CHECK(first->uid == 1001);
  CHECK(first->user == "alice");
  // Calls in flight together arrive out of order: each counter once.
  CHECK(table.Check(s.id, 3, SessionMac(s.key, s.id, 3, binding), binding, kNow).ok());
  CHECK(table.Check(s.id, 2, SessionMac(s.key, s.id, 2, binding), binding, kNow).ok());
  auto replayed = table.Check(s.id, 2, SessionMac(s.key, s.id, 2, binding), binding, kNow);
  CHECK(absl::IsUnauthenticated(replayed.status()));
  CHECK(replayed.status().message() == "nexec session: the call was replayed");
  // Far behind the newest: refused (it cannot be told from a replay).
  CHECK(table.Check(s.id, 100000, SessionMac(s.key, s.id, 100000, binding), binding, kNow).ok());
  CHECK_FALSE(table.Check(s.id, 4, SessionMac(s.key, s.id, 4, binding), binding, kNow).ok());
}

TEST_CASE("a session call is refused when forged, moved onto another request, of an unknown session or expired "
          "[B9][C6]") {
  SessionTable table;
  Opened s = OpenFor(table, Caller{1001, 1001, "alice"});
  Opened root = OpenFor(table, Caller{0, 0, "root"});
  const std::string binding = "Kill\nabc123";
  // Made for another request.
  auto moved = table.Check(s.id, 1, SessionMac(s.key, s.id, 1, "Kill\nother"), binding, kNow);
  CHECK(absl::IsUnauthenticated(moved.status()));
  CHECK(moved.status().message().find("does not match") != std::string::npos);
  // Alice's key on root's session: she cannot speak as root.
  CHECK(absl::IsUnauthenticated(table.Check(root.id, 1, SessionMac(s.key, root.id, 1, binding), binding, kNow).status()));
  // A guessed key.
  CHECK(absl::IsUnauthenticated(
      table.Check(root.id, 1, SessionMac(std::string(32, 'x'), root.id, 1, binding), binding, kNow).status()));
  // An id the table never gave (it restarted): the caller opens a new one.
  auto unknown = table.Check("00112233445566778899aabbccddeeff", 1, "00", binding, kNow);
  CHECK(absl::IsUnauthenticated(unknown.status()));
  CHECK(unknown.status().message().rfind("nexec session: unknown session", 0) == 0);
  // Past its lifetime.
  auto late = table.Check(s.id, 1, SessionMac(s.key, s.id, 1, binding), binding, kNow + kSessionLifetime);
  CHECK(late.status().message() == "nexec session: the session expired");
  // A malformed half of the exchange opens nothing.
  CHECK_FALSE(table.Open(Caller{}, "not-hex", kNow).ok());
  CHECK(table.size() == 2);
}

TEST_CASE("a full session table lets its oldest sessions go first [B9]") {
  SessionTable table(/*capacity=*/2);
  Opened first = OpenFor(table, Caller{1, 1, "a"});
  Opened second = OpenFor(table, Caller{2, 2, "b"});
  Opened third = OpenFor(table, Caller{3, 3, "c"});
  CHECK(table.size() == 2);
  const std::string b = "ListHosts\n00";
  CHECK_FALSE(table.Check(first.id, 1, SessionMac(first.key, first.id, 1, b), b, kNow).ok());
  CHECK(table.Check(second.id, 1, SessionMac(second.key, second.id, 1, b), b, kNow).ok());
  CHECK(table.Check(third.id, 1, SessionMac(third.key, third.id, 1, b), b, kNow).ok());
}

TEST_CASE("a caller offers one session per peer, uses it with rising counters, and offers again once it is "
          "forgotten [B9]") {
  SessionTable table;
  ClientSessions client;
  const std::string peer = "127.0.0.1:7000";
  CHECK_FALSE(client.Sign(peer, "x", kNow).has_value());
  REQUIRE(client.ShouldOffer(peer, kNow));
  CHECK_FALSE(client.ShouldOffer(peer, kNow));  // one offer in flight at a time
  auto offer = KeyExchange::Make();
  REQUIRE(offer.ok());
  auto opened = table.Open(Caller{0, 0, "root"}, offer->public_hex(), kNow);
  REQUIRE(opened.ok());
  client.Settle(peer, &*offer, opened->id, opened->public_hex, Caller{0, 0, "root"}, kNow);
  auto one = client.Sign(peer, "b", kNow);
  auto two = client.Sign(peer, "b", kNow);
  REQUIRE(one.has_value());
  REQUIRE(two.has_value());
  CHECK(two->counter == one->counter + 1);
  CHECK(table.Check(one->id, one->counter, one->mac, "b", kNow).ok());
  CHECK(table.Check(two->id, two->counter, two->mac, "b", kNow).ok());
  // Near the end of its life it is not used: a new one is offered.
  CHECK_FALSE(client.Sign(peer, "b", kNow + kSessionLifetime - absl::Minutes(1)).has_value());
  client.Forget(peer, one->id);
  CHECK_FALSE(client.Sign(peer, "b", kNow).has_value());
  CHECK(client.ShouldOffer(peer, kNow));
  // An offer the peer did not take (no answer) leaves no session, and may be made again.
  client.Settle(peer, &*offer, "", "", std::nullopt, kNow);
  CHECK_FALSE(client.Sign(peer, "b", kNow).has_value());
  CHECK(client.ShouldOffer(peer, kNow));
}

TEST_CASE("one account's flood of session offers evicts only its own oldest sessions, never root's or another "
          "account's [B9]") {
  SessionTable table(/*capacity=*/100, /*per_account=*/3);
  auto open = [&](const Caller& who) {
    auto offer = KeyExchange::Make();
    REQUIRE(offer.ok());
    auto opened = table.Open(who, offer->public_hex(), kNow);
    REQUIRE(opened.ok());
    auto key = offer->SessionKey(opened->public_hex, opened->id, /*offering=*/true);
    REQUIRE(key.ok());
    return std::make_pair(opened->id, *key);
  };
  auto alive = [&](const std::pair<std::string, std::string>& s, uint64_t counter) {
    return table.Check(s.first, counter, SessionMac(s.second, s.first, counter, "b"), "b", kNow).ok();
  };
  const auto root = open(Caller{0, 0, "root"});
  const auto bob = open(Caller{1001, 1001, "bob"});
  std::vector<std::pair<std::string, std::string>> flood;
  for (int i = 0; i < 10; ++i) flood.push_back(open(Caller{1000, 1000, "mallory"}));
  CHECK(alive(root, 1));
  CHECK(alive(bob, 1));
  CHECK_FALSE(alive(flood[0], 1));
  CHECK_FALSE(alive(flood[6], 1));
  CHECK(alive(flood[7], 1));
  CHECK(alive(flood[9], 1));
  CHECK(table.size() == 5);
}

TEST_CASE("an answer counts only when the peer that proved the session signed it, for that very call [B9]") {
  SessionTable table;
  ClientSessions client;
  const std::string peer = "127.0.0.1:7000";
  auto offer = KeyExchange::Make();
  REQUIRE(offer.ok());
  auto opened = table.Open(Caller{1000, 1000, "alice"}, offer->public_hex(), kNow);
  REQUIRE(opened.ok());
  auto first = client.Settle(peer, &*offer, opened->id, opened->public_hex, Caller{2000, 2000, "nexec"}, kNow);
  REQUIRE(first.has_value());
  CHECK(first->counter == 0);
  const std::string digest = "d1";

  // The peer's proof of the answer to the offering call (counter 0) is the account that
  // accepted the session.
  auto proof = table.AnswerMac(opened->id, 0, digest);
  REQUIRE(proof.ok());
  auto signer = ClientSessions::CheckAnswer(*first, digest, *proof);
  REQUIRE(signer.ok());
  CHECK(signer->uid == 2000);
  // Another answer, another call's proof, no proof, or an unknown session: refused.
  CHECK(absl::IsUnauthenticated(ClientSessions::CheckAnswer(*first, "d2", *proof).status()));
  auto next = client.Sign(peer, "b", kNow);
  REQUIRE(next.has_value());
  CHECK(absl::IsUnauthenticated(ClientSessions::CheckAnswer(*next, digest, *proof).status()));
  CHECK(ClientSessions::CheckAnswer(*next, digest, *table.AnswerMac(opened->id, next->counter, digest)).ok());
  CHECK(absl::IsUnauthenticated(ClientSessions::CheckAnswer(*next, digest, "").status()));
  CHECK(absl::IsNotFound(table.AnswerMac("no-such-session", 0, digest).status()));

  // A session whose acceptance nobody proved (a squatter answering the offer with its own
  // half) signs nothing that counts, even with the right key.
  ClientSessions fooled;
  auto squatter = table.Open(Caller{1000, 1000, "alice"}, offer->public_hex(), kNow);
  REQUIRE(squatter.ok());
  auto unproven = fooled.Settle(peer, &*offer, squatter->id, squatter->public_hex, std::nullopt, kNow);
  REQUIRE(unproven.has_value());
  auto mac = table.AnswerMac(squatter->id, 0, digest);
  REQUIRE(mac.ok());
  auto refused = ClientSessions::CheckAnswer(*unproven, digest, *mac);
  CHECK(absl::IsUnauthenticated(refused.status()));
  CHECK(refused.status().message().find("no valid munge credential") != std::string::npos);
}

}  // namespace
}  // namespace jc::nexec
