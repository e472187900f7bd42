// The agents' stream's proofs (issue 48, B9): what a sealed frame proves, and what is refused.
#include "executor/auth/stream_session.h"

#include <catch2/catch.hpp>

namespace jc::nexec {
namespace {

namespace pb = ::nexec::v1;

// Both ends of one keyed stream, keyed as the opening keys them.
struct Ends {
  StreamSealer agent = StreamSealer::Unsigned(true);
  StreamSealer master = StreamSealer::Unsigned(false);
};
Ends KeyedEnds(const std::string& session) {
  auto agent_half = KeyExchange::Make();
  auto master_half = KeyExchange::Make();
  REQUIRE(agent_half.ok());
  REQUIRE(master_half.ok());
  auto agent_key = agent_half->SessionKey(master_half->public_hex(), session, /*offering=*/true);
  auto master_key = master_half->SessionKey(agent_half->public_hex(), session, /*offering=*/false);
  REQUIRE(agent_key.ok());
  REQUIRE(master_key.ok());
  REQUIRE(*agent_key == *master_key);
  return {StreamSealer::Keyed(session, *agent_key, true), StreamSealer::Keyed(session, *master_key, false)};
}

pb::AgentStreamMessage HeartbeatOf(const std::string& host, uint64_t call) {
  pb::AgentStreamMessage m;
  m.set_call(call);
  m.mutable_heartbeat()->mutable_info()->set_host(host);
  return m;
}

TEST_CASE("an agent stream's sealed frames are taken in order, each once, and only as sent [B9][C6]") {
  Ends ends = KeyedEnds("s1");
  const pb::AgentStreamFrame first = ends.agent.Seal(HeartbeatOf("node1", 1));
  const pb::AgentStreamFrame second = ends.agent.Seal(HeartbeatOf("node1", 2));
  CHECK(first.counter() == 1);
  CHECK_FALSE(first.mac().empty());

  SECTION("in order: each taken, as sent") {
    auto a = ends.master.Open(first);
    REQUIRE(a.ok());
    CHECK(a->heartbeat().info().host() == "node1");
    auto b = ends.master.Open(second);
    REQUIRE(b.ok());
    CHECK(b->call() == 2);
    SECTION("then either again: replayed") {
      auto again = ends.master.Open(second);
      CHECK(absl::IsUnauthenticated(again.status()));
      CHECK(again.status().message().find("replayed") != absl::string_view::npos);
    }
  }
  SECTION("one skipped: refused") {
    CHECK(absl::IsUnauthenticated(ends.master.Open(second).status()));
  }
  SECTION("its body altered: refused, and the stream's next frame still stands") {
    pb::AgentStreamFrame altered = first;
    pb::AgentStreamMessage other = HeartbeatOf("node2", 1);
    other.SerializeToString(altered.mutable_body());
    auto taken = ends.master.Open(altered);
    CHECK(absl::IsUnauthenticated(taken.status()));
    CHECK(taken.status().message().find("proof") != absl::string_view::npos);
    CHECK(ends.master.Open(first).ok());
  }
  SECTION("sent back to its sender: refused (each direction is its own)") {
    CHECK(absl::IsUnauthenticated(ends.agent.Open(first).status()));
  }
  SECTION("moved to another stream: refused") {
    Ends other = KeyedEnds("s2");
    CHECK(absl::IsUnauthenticated(other.master.Open(first).status()));
  }
  SECTION("unsigned, on a keyed stream: refused") {
    pb::AgentStreamFrame bare = first;
    bare.clear_mac();
    CHECK(absl::IsUnauthenticated(ends.master.Open(bare).status()));
  }
}

TEST_CASE("an agent stream's opening is taken once: a second hello or welcome on it is refused [B9][C6]") {
  Ends ends = KeyedEnds("s3");
  pb::AgentStreamMessage hello;
  hello.mutable_hello()->set_host("node1");
  CHECK(absl::IsUnauthenticated(ends.master.Open(ends.agent.Seal(hello)).status()));
  pb::AgentStreamMessage welcome;
  welcome.mutable_welcome()->set_session("s3");
  CHECK(absl::IsUnauthenticated(ends.agent.Open(ends.master.Seal(welcome)).status()));
}

TEST_CASE("with --auth=none an agent stream opens unsigned, and a welcome answers only its own hello [B9]") {
  const MungeAuth none = MungeAuth::Disabled();
  auto opening = OpenAgentStream(none, "node1");
  REQUIRE(opening.ok());
  CHECK(opening->frame.credential().empty());
  auto accepted = AcceptAgentStream(none, opening->frame, 0, "store-1", 7);
  REQUIRE(accepted.ok());
  CHECK(accepted->host == "node1");
  CHECK(accepted->caller.root());
  pb::AgentStreamWelcome welcome;
  auto sealer = CheckWelcome(none, *opening, accepted->welcome, {}, &welcome);
  REQUIRE(sealer.ok());
  CHECK(welcome.identity() == "store-1");
  CHECK(welcome.term() == 7);
  // Another opening's welcome (a stream's answer moved to another): refused.
  auto other = OpenAgentStream(none, "node2");
  REQUIRE(other.ok());
  auto moved = CheckWelcome(none, *other, accepted->welcome, {}, &welcome);
  CHECK(absl::IsUnauthenticated(moved.status()));
  // A stream must open with a hello.
  pb::AgentStreamMessage heartbeat = HeartbeatOf("node1", 1);
  pb::AgentStreamFrame not_hello;
  heartbeat.SerializeToString(not_hello.mutable_body());
  CHECK(absl::IsUnauthenticated(AcceptAgentStream(none, not_hello, 0, "store-1", 7).status()));
}

TEST_CASE("with munge on, an agent stream's hello without a credential is refused before anything [B9][C6]") {
  const MungeAuth munge = MungeAuth::Munge("/nonexistent/munge.socket");
  auto opening = OpenAgentStream(MungeAuth::Disabled(), "node1");  // made unsigned
  REQUIRE(opening.ok());
  auto accepted = AcceptAgentStream(munge, opening->frame, 0, "store-1", 7);
  CHECK(absl::IsUnauthenticated(accepted.status()));
  CHECK(accepted.status().message().find("no munge credential") != absl::string_view::npos);
}

}  // namespace
}  // namespace jc::nexec
