// A center's port range (SPEC A17, adapters/sdk/port_book.h): no port is given twice while
// held, a named one only inside the range, the same replica asked again gets the same ones.
#include "adapters/sdk/port_book.h"

#include <catch2/catch.hpp>
#include <set>

#include "adapters/sdk/center_config.h"
#include "common/validate.h"

using jc::adapter::PortBook;

TEST_CASE("a port range gives each replica ports no other replica holds, and takes them back when it ends [A17]",
          "[A17]") {
  PortBook book(30000, 30003);
  auto a = book.Hold("jc-a-0-0-0", {0, 0});
  REQUIRE(a.ok());
  REQUIRE(a->size() == 2);
  auto b = book.Hold("jc-b-0-0-0", {0, 0});
  REQUIRE(b.ok());
  std::set<int> all = {(*a)[0], (*a)[1], (*b)[0], (*b)[1]};
  CHECK(all == std::set<int>{30000, 30001, 30002, 30003});  // four distinct, all in range
  // Full: refused, and nothing is held by the refusal.
  auto c = book.Hold("jc-c-0-0-0", {0});
  CHECK(c.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(c.status().message()), Catch::Contains("every port of this center's range 30000-30003"));
  CHECK(book.held() == 4);
  // One replica's release frees only its own ports.
  book.Release("jc-b-0-0-0", {(*a)[0]});
  CHECK(book.held() == 4);
  book.Release("jc-a-0-0-0", *a);
  CHECK(book.held() == 2);
  // A named port: inside the range and free, else refused naming it.
  CHECK(book.Hold("jc-d-0-0-0", {(*b)[0]}).status().message() ==
        "port " + std::to_string((*b)[0]) + " is held by another replica at this center");
  CHECK(book.Hold("jc-d-0-0-0", {29999}).status().message() == "port 29999 is outside this center's port range 30000-30003");
  auto d = book.Hold("jc-d-0-0-0", {(*a)[1], 0});
  REQUIRE(d.ok());
  CHECK((*d)[0] == (*a)[1]);
  CHECK((*d)[1] == (*a)[0]);  // the only one left, never the named one twice
}

TEST_CASE("the same replica asked for again with the same ports held is given the same ports [A17]", "[A17]") {
  PortBook one(40000, 40999), two(40000, 40999);
  one.Restore("jc-x-0-0-0", 40500);
  two.Restore("jc-x-0-0-0", 40500);
  auto first = one.Hold("jc-job-7-0-3-1", {0, 0, 0});
  auto again = two.Hold("jc-job-7-0-3-1", {0, 0, 0});
  REQUIRE(first.ok());
  REQUIRE(again.ok());
  CHECK(*first == *again);
  // Another replica starts elsewhere in the range (replicas do not pile up at its start).
  auto other = one.Hold("jc-job-8-0-0-0", {0});
  REQUIRE(other.ok());
  CHECK(std::set<int>(first->begin(), first->end()).count((*other)[0]) == 0);
}

TEST_CASE("a center without a port range gives none, and one with a bad range is refused at start [A17][C5]",
          "[A17][C5]") {
  PortBook none(0, 0);
  CHECK_FALSE(none.offers());
  CHECK(none.Hold("r", {}).ok());
  CHECK(none.Hold("r", {0}).status().code() == absl::StatusCode::kFailedPrecondition);
  for (const char* bad : {"{first: 80, last: 90}", "{first: 30010, last: 30000}", "{first: 30000, last: 70000}", "30000"}) {
    INFO(bad);
    auto c = jc::adapter::ParseCenterConfig(std::string("center_id: c\nports: ") + bad + "\n");
    CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
  }
  auto good = jc::adapter::ParseCenterConfig("center_id: c\nports: {first: 30000, last: 30999}\nendpoint_host: node1\n");
  REQUIRE(good.ok());
  CHECK(good->port_first == 30000);
  CHECK(good->port_last == 30999);
  CHECK(good->endpoint_host == "node1");
  CHECK(jc::adapter::ParseCenterConfig("center_id: c\nendpoint_host: \"a b\"\n").status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a port's name, number and readiness path are checked where they enter [A17][C5]", "[A17][C5]") {
  CHECK(jc::CheckPort("p", "http", 0, "").ok());
  CHECK(jc::CheckPort("p", "a-1", 65535, "/api/status?x=1").ok());
  CHECK(jc::CheckPort("p", "Http", 0, "").message().find("p.name:") == 0);
  CHECK_FALSE(jc::CheckPort("p", "1http", 0, "").ok());
  CHECK_FALSE(jc::CheckPort("p", "sixteen-letters-", 0, "").ok());
  CHECK_FALSE(jc::CheckPort("p", "a_b", 0, "").ok());
  CHECK(jc::CheckPort("p", "http", 65536, "").message() == "p.port: 1 to 65535 (or 0: the center chooses), got 65536");
  CHECK_FALSE(jc::CheckPort("p", "http", -1, "").ok());
  CHECK_FALSE(jc::CheckPort("p", "http", 0, "status").ok());
  CHECK_FALSE(jc::CheckPort("p", "http", 0, "/a b").ok());
  CHECK_FALSE(jc::CheckPort("p", "http", 0, "/a\r\nHost: x").ok());
  CHECK_FALSE(jc::CheckPort("p", "http", 0, "/" + std::string(300, 'a')).ok());
  CHECK(jc::PortEnvName("other-one") == "JC_PORT_OTHER_ONE");
}

// Attacker's review, session 34: a replica asked for again after its record failed (its
// process already has its ports) was given new ones, and the old stayed booked.
TEST_CASE("a replica asked for again while it holds ports is given the same ones, in the same order [A17]", "[A17]") {
  PortBook book(30000, 30099);
  auto first = book.Hold("jc-r-0-0-0", {0, 0, 30050});
  REQUIRE(first.ok());
  auto again = book.Hold("jc-r-0-0-0", {0, 0, 30050});
  REQUIRE(again.ok());
  CHECK(*again == *first);
  CHECK(book.held() == 3);
  // Another replica still cannot have them.
  CHECK_FALSE(book.Hold("jc-s-0-0-0", {(*first)[0]}).ok());
}
