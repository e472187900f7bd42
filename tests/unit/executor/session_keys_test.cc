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
  client.Settle(peer, &*offer, opened->id + " " + opened->public_hex, kNow);
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
  client.Settle(peer, &*offer, "", kNow);
  CHECK_FALSE(client.Sign(peer, "b", kNow).has_value());
  CHECK(client.ShouldOffer(peer, kNow));
}

}  // namespace
}  // namespace jc::nexec
