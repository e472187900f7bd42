#include <catch2/catch.hpp>

#include "services/registry/registry.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/test_store.h"

namespace v1 = jointcloud::v1;
using jc::registry::Registry;

namespace {

using jc::testing::MakeCenter;

struct Fixture {
  std::unique_ptr<jc::store::Store> store = jc::testing::MakeTestStore();
  jc::FakeClock clock;
  Registry registry{store.get(), &clock, {absl::Seconds(30), absl::Seconds(90)}};
};

}  // namespace

TEST_CASE("centers are created, read, updated, listed and deleted", "[A1]") {
  Fixture f;
  auto created = f.registry.Create(MakeCenter("c1"));
  REQUIRE(created.ok());
  CHECK(created->status() == jc::registry::kUnknown);  // until the first heartbeat
  CHECK(created->created_at().seconds() == 1'700'000'000);

  auto got = f.registry.Get("c1");
  REQUIRE(got.ok());
  CHECK(got->name() == "Center c1");
  CHECK(got->capacity().gpu() == 8);

  v1::Center patch;
  patch.set_ai_center_id("c1");
  patch.set_region("south");
  google::protobuf::FieldMask mask;
  mask.add_paths("region");
  f.clock.Advance(absl::Seconds(5));
  auto updated = f.registry.Update(patch, mask);
  REQUIRE(updated.ok());
  CHECK(updated->region() == "south");
  CHECK(updated->name() == "Center c1");  // untouched by the mask
  CHECK(updated->updated_at().seconds() == 1'700'000'005);

  REQUIRE(f.registry.Delete("c1").ok());
  CHECK(absl::IsNotFound(f.registry.Get("c1").status()));
  CHECK(absl::IsNotFound(f.registry.Delete("c1")));
}

TEST_CASE("bad centers are refused and nothing is written", "[A1][C5]") {
  Fixture f;
  auto expect_invalid = [&](v1::Center c, const std::string& needle) {
    auto r = f.registry.Create(c);
    INFO(needle);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(r.status().message()).find(needle) != std::string::npos);
  };
  expect_invalid(MakeCenter(std::string(64, 'x')), "64 bytes");
  auto c = MakeCenter("ok");
  c.set_name(std::string(64, 'n'));
  expect_invalid(c, "name");
  c = MakeCenter("ok");
  c.clear_name();
  expect_invalid(c, "name is required");
  c = MakeCenter("ok");
  c.set_status(3);
  expect_invalid(c, "status");
  c = MakeCenter("ok");
  c.set_geometry(0, 181);
  expect_invalid(c, "longitude");
  c = MakeCenter("ok");
  c.set_geometry(1, -90.5);
  expect_invalid(c, "latitude");
  c = MakeCenter("ok");
  c.add_geometry(1);
  expect_invalid(c, "geometry");
  c = MakeCenter("ok");
  c.mutable_capacity()->set_cpu(-1);
  expect_invalid(c, "capacity.cpu");
  c = MakeCenter("ok");
  c.set_region(std::string(64, 'r'));
  expect_invalid(c, "region");
  // Named like one of Jointcloud's services, its adapter certificate would be taken by
  // every adapter as the control plane's (--tls_allowed_clients names them) [C6].
  expect_invalid(MakeCenter("jointcloud"), "reserved");
  expect_invalid(MakeCenter("scheduler"), "reserved");

  auto listed = f.registry.List({});
  REQUIRE(listed.ok());
  CHECK(listed->centers().empty());
}

TEST_CASE("duplicate ids conflict instead of overwriting", "[A1][C5]") {
  Fixture f;
  REQUIRE(f.registry.Create(MakeCenter("dup", "north")).ok());
  auto again = f.registry.Create(MakeCenter("dup", "south"));
  CHECK(absl::IsAlreadyExists(again.status()));
  CHECK(f.registry.Get("dup")->region() == "north");
}

TEST_CASE("updates of unknown fields or centers are refused", "[A1][C5]") {
  Fixture f;
  REQUIRE(f.registry.Create(MakeCenter("c1")).ok());
  v1::Center patch = MakeCenter("c1");
  google::protobuf::FieldMask mask;
  mask.add_paths("created_at");
  CHECK(absl::IsInvalidArgument(f.registry.Update(patch, mask).status()));
  patch.set_status(7);
  mask.Clear();
  mask.add_paths("status");
  CHECK(absl::IsInvalidArgument(f.registry.Update(patch, mask).status()));
  CHECK(f.registry.Get("c1")->status() == jc::registry::kUnknown);
  patch.set_ai_center_id("missing");
  patch.set_status(1);
  CHECK(absl::IsNotFound(f.registry.Update(patch, mask).status()));
}

TEST_CASE("lists page by token and filter by region and status", "[A1]") {
  Fixture f;
  for (int i = 0; i < 7; ++i) {
    REQUIRE(f.registry.Create(MakeCenter("c" + std::to_string(i), i % 2 ? "odd" : "even")).ok());
  }
  REQUIRE(f.registry.Heartbeat("c0", true).ok());

  v1::ListCentersRequest req;
  req.set_page_size(3);
  std::vector<std::string> seen;
  int pages = 0;
  do {
    auto page = f.registry.List(req);
    REQUIRE(page.ok());
    for (const auto& c : page->centers()) seen.push_back(c.ai_center_id());
    req.set_page_token(page->next_page_token());
    ++pages;
  } while (!req.page_token().empty());
  CHECK(pages == 3);
  CHECK(seen == std::vector<std::string>{"c0", "c1", "c2", "c3", "c4", "c5", "c6"});

  v1::ListCentersRequest odd;
  odd.set_region("odd");
  CHECK(f.registry.List(odd)->centers_size() == 3);
  v1::ListCentersRequest available;
  available.set_status(1);
  auto avail = f.registry.List(available);
  REQUIRE(avail->centers_size() == 1);
  CHECK(avail->centers(0).ai_center_id() == "c0");
  v1::ListCentersRequest bad;
  bad.set_page_token("not-a-token");
  CHECK(absl::IsInvalidArgument(f.registry.List(bad).status()));
}

TEST_CASE("status follows heartbeats: available, then unknown, then unavailable", "[A1]") {
  Fixture f;
  REQUIRE(f.registry.Create(MakeCenter("c1")).ok());
  REQUIRE(*f.registry.Heartbeat("c1", true) == jc::registry::kAvailable);
  CHECK(*f.registry.SweepHealth() == 0);

  f.clock.Advance(absl::Seconds(31));
  CHECK(*f.registry.SweepHealth() == 1);
  CHECK(f.registry.Get("c1")->status() == jc::registry::kUnknown);

  f.clock.Advance(absl::Seconds(60));
  CHECK(*f.registry.SweepHealth() == 1);
  CHECK(f.registry.Get("c1")->status() == jc::registry::kUnavailable);

  // It comes back the moment it reports again.
  CHECK(*f.registry.Heartbeat("c1", true) == jc::registry::kAvailable);
  // An adapter that reports itself unhealthy makes the center unavailable at once.
  CHECK(*f.registry.Heartbeat("c1", false) == jc::registry::kUnavailable);
  CHECK(absl::IsNotFound(f.registry.Heartbeat("nope", true).status()));
}

TEST_CASE("join, leave and status changes are events in revision order", "[A1]") {
  Fixture f;
  REQUIRE(f.registry.Create(MakeCenter("c1")).ok());
  REQUIRE(f.registry.Heartbeat("c1", true).ok());
  REQUIRE(f.registry.Delete("c1").ok());

  std::vector<v1::CenterEvent> events;
  auto read = f.registry.events().WaitAfter(0, absl::ZeroDuration(), &events);
  REQUIRE(read == jc::EventLog<v1::CenterEvent>::Read::kOk);
  REQUIRE(events.size() == 3);
  CHECK(events[0].type() == v1::CenterEvent::JOINED);
  CHECK(events[1].type() == v1::CenterEvent::STATUS_CHANGED);
  CHECK(events[1].previous_status() == jc::registry::kUnknown);
  CHECK(events[1].center().status() == jc::registry::kAvailable);
  CHECK(events[2].type() == v1::CenterEvent::LEFT);
  CHECK(events[0].revision() < events[1].revision());
  CHECK(events[1].revision() < events[2].revision());
}

TEST_CASE("a watcher too far behind is told to start over", "[A1]") {
  using Log = jc::EventLog<v1::CenterEvent>;
  Log log(2);
  for (int i = 0; i < 5; ++i) log.Append(v1::CenterEvent(), [](v1::CenterEvent& e, uint64_t rev) { e.set_revision(rev); });
  std::vector<v1::CenterEvent> out;
  CHECK(log.WaitAfter(0, absl::ZeroDuration(), &out) == Log::Read::kCompacted);
  CHECK(log.WaitAfter(3, absl::ZeroDuration(), &out) == Log::Read::kOk);
  REQUIRE(out.size() == 2);
  CHECK(out[0].revision() == 4);
  CHECK(out[1].revision() == 5);
}

TEST_CASE("an event log numbered by a store skips the revisions that never committed", "[C8]") {
  using Log = jc::EventLog<v1::CenterEvent>;
  Log log(3);
  auto at = [](uint64_t rev) {
    v1::CenterEvent e;
    e.set_revision(rev);
    return e;
  };
  log.RestoreStamped({at(7), at(9)}, 9);  // 8 was taken by a write that failed
  std::vector<v1::CenterEvent> out;
  CHECK(log.WaitAfter(6, absl::ZeroDuration(), &out) == Log::Read::kOk);
  CHECK(out.size() == 2);
  out.clear();
  CHECK(log.WaitAfter(5, absl::ZeroDuration(), &out) == Log::Read::kCompacted);  // 6 is not here
  log.AppendStamped({at(12), at(13)});  // pushes 7 out of the window of 3
  CHECK(log.last_revision() == 13);
  CHECK(log.WaitAfter(6, absl::ZeroDuration(), &out) == Log::Read::kCompacted);
  CHECK(log.WaitAfter(8, absl::ZeroDuration(), &out) == Log::Read::kOk);
  REQUIRE(out.size() == 3);
  CHECK(out[0].revision() == 9);
  CHECK(out[2].revision() == 13);
  out.clear();
  CHECK(log.WaitAfter(13, absl::ZeroDuration(), &out) == Log::Read::kOk);
  CHECK(out.empty());
}
