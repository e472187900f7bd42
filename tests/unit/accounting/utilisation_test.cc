// Utilisation against offered capacity (issue 49 item 12): the registry keeps each center's
// capacity as a history; a month's report integrates it over the hours each center was
// registered and sets it against what the month's usage records allocated, on the test
// store (SQLite, or the suite's PostgreSQL).

#include <catch2/catch.hpp>

#include "absl/time/time.h"
#include "common/timestamp.h"
#include "services/accounting/usage_book.h"
#include "services/accounting/utilisation.h"
#include "services/registry/registry.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/test_store.h"

namespace v1 = jointcloud::v1;

namespace {

absl::Time At(const char* text) {
  absl::Time t;
  std::string error;
  REQUIRE(absl::ParseTime(absl::RFC3339_full, text, &t, &error));
  return t;
}

v1::UsageRecord Record(const std::string& id, const std::string& center, absl::Time end, double cost) {
  v1::UsageRecord r;
  r.set_record_id(id);
  r.set_job_id(id.substr(0, id.find('/')));
  r.set_project("alpha");
  r.set_user_name("u");
  r.set_ai_center_id(center);
  r.set_resource_spec_id("cpu4");
  r.set_outcome("succeeded");
  *r.mutable_started_at() = jc::ToTimestamp(end - absl::Hours(1));
  *r.mutable_ended_at() = jc::ToTimestamp(end);
  r.set_wall_seconds(3600);
  r.set_cpu_seconds(1800);  // half a core busy of the four allocated
  r.set_gpus(1);
  r.set_gpu_seconds(3600);
  r.set_cost(cost);
  r.set_billing_month(absl::FormatTime("%Y-%m", end, absl::UTCTimeZone()));
  return r;
}

v1::Center Center(const std::string& id, int cpu, int gpu) {
  v1::Center c = jc::testing::MakeCenter(id);
  c.mutable_capacity()->set_cpu(cpu);
  c.mutable_capacity()->set_gpu(gpu);
  return c;
}

const v1::CenterUtilisation* Find(const v1::GetUtilisationResponse& r, const std::string& center) {
  for (const auto& c : r.centers()) {
    if (c.ai_center_id() == center) return &c;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("utilisation: a center's offered capacity-hours follow its registered capacity over the month, against "
          "what its replicas were allocated, with revenue, idle hours and the months before [A7]",
          "[A7]") {
  auto store = jc::testing::MakeTestStore();
  jc::FakeClock clock(At("2026-11-01T00:00:00Z"));
  jc::registry::Registry registry(store.get(), &clock, {});
  jc::accounting::Utilisation utilisation(store.get(), &clock);
  // A spec of four cores, as the catalog keeps it.
  REQUIRE(store->Exec("INSERT INTO resource_specs (id, service_type, doc) VALUES ('cpu4', 'batch', "
                      "'{\"resource_spec_id\":\"cpu4\",\"resource_quantity\":{\"cpu\":\"4\"},\"price\":20}')")
              .ok());

  REQUIRE(registry.Create(Center("bj", 10, 2)).ok());
  clock.Advance(absl::Hours(240));  // 11-11: twice the cores
  v1::Center patch;
  patch.set_ai_center_id("bj");
  patch.mutable_capacity()->set_cpu(20);
  patch.mutable_capacity()->set_gpu(2);
  google::protobuf::FieldMask mask;
  mask.add_paths("capacity");
  REQUIRE(registry.Update(patch, mask).ok());
  // A change of something else writes no step.
  v1::Center renamed;
  renamed.set_ai_center_id("bj");
  renamed.set_name("Beijing");
  google::protobuf::FieldMask name_mask;
  name_mask.add_paths("name");
  REQUIRE(registry.Update(renamed, name_mask).ok());
  clock.Advance(absl::Hours(240));  // 11-21
  REQUIRE(registry.Create(Center("wh", 5, 0)).ok());
  clock.Advance(absl::Hours(10));
  {
    auto txn = store->Begin();
    REQUIRE(txn.ok());
    REQUIRE(jc::accounting::AppendUsage(**txn, {Record("j1/0/0/0", "bj", At("2026-11-05T10:00:00Z"), 20),
                                                Record("j2/0/0/0", "bj", At("2026-11-12T10:00:00Z"), 20),
                                                Record("j3/0/0/0", "bj", At("2026-10-30T10:00:00Z"), 20)})
                .ok());
    REQUIRE((*txn)->Commit().ok());
  }

  v1::GetUtilisationRequest req;
  req.set_month("2026-11");
  auto got = utilisation.Report(req, std::nullopt);
  REQUIRE(got.ok());
  INFO(got->DebugString());
  REQUIRE(got->centers_size() == 2);
  const auto* bj = Find(*got, "bj");
  REQUIRE(bj != nullptr);
  CHECK(bj->partial());
  REQUIRE(bj->resources_size() == 2);
  const auto& cpu = bj->resources(0);
  CHECK(cpu.resource() == "cpu");
  CHECK(cpu.offered_hours() == Approx(240 * 10 + 250 * 20));  // to now: 490 hours registered
  CHECK(cpu.used_hours() == Approx(8));  // two attempts of 4 cores for an hour (October's is not November's)
  CHECK(cpu.measured_hours() == Approx(1));
  CHECK(cpu.idle_hours() == Approx(7400 - 8));
  CHECK(cpu.ratio() == Approx(8.0 / 7400));
  const auto& gpu = bj->resources(1);
  CHECK(gpu.offered_hours() == Approx(490 * 2));
  CHECK(gpu.used_hours() == Approx(2));
  CHECK(bj->revenue() == Approx(40));
  CHECK(bj->records() == 2);
  const auto* wh = Find(*got, "wh");
  REQUIRE(wh != nullptr);
  CHECK(wh->resources(0).offered_hours() == Approx(50));
  CHECK(wh->resources(0).ratio() == 0);
  CHECK(wh->resources(1).ratio() == 0);  // no GPU offered: nothing to divide by
  // The trend: October had bj's record but no capacity (bj was registered in November).
  REQUIRE(got->trend_size() == 1);
  CHECK(got->trend(0).month() == "2026-10");
  CHECK(got->trend(0).ai_center_id() == "bj");
  CHECK(got->trend(0).resources(0).offered_hours() == 0);
  CHECK(got->trend(0).resources(0).used_hours() == Approx(4));

  // An operator's view: its centers only.
  auto mine = utilisation.Report(req, std::vector<std::string>{"wh"});
  REQUIRE(mine.ok());
  REQUIRE(mine->centers_size() == 1);
  CHECK(mine->centers(0).ai_center_id() == "wh");
  CHECK(mine->trend_size() == 0);

  // December: bj leaves on the 2nd; November is whole now.
  clock.Advance(absl::Hours(24 * 9 + 14));  // 12-01T00:00
  clock.Advance(absl::Hours(24));
  REQUIRE(registry.Delete("bj").ok());
  clock.Advance(absl::Hours(24));
  req.set_month("");  // this month
  req.set_trend_months(1);
  got = utilisation.Report(req, std::nullopt);
  REQUIRE(got.ok());
  CHECK(got->month() == "2026-12");
  bj = Find(*got, "bj");
  REQUIRE(bj != nullptr);
  CHECK(bj->resources(0).offered_hours() == Approx(24 * 20));  // one day, then gone
  REQUIRE(Find(*got, "wh") != nullptr);
  CHECK(Find(*got, "wh")->resources(0).offered_hours() == Approx(48 * 5));
  bool november_whole = false;
  for (const auto& t : got->trend()) {
    if (t.ai_center_id() == "bj" && t.month() == "2026-11") {
      november_whole = !t.partial() && t.resources(0).offered_hours() == Approx(240 * 10 + 480 * 20);
    }
  }
  CHECK(november_whole);

  // Bad requests change nothing and say why; a month is written one way (helper-52 F6).
  for (const char* bad : {"2026-13", "2026-1", " 2026-12", "2026-12 ", "0001-01", "-9223372036854775808-01", "May"}) {
    INFO(bad);
    req.set_month(bad);
    CHECK(absl::IsInvalidArgument(utilisation.Report(req, std::nullopt).status()));
  }
  req.set_month("1970-01");
  req.set_trend_months(24);  // months before 1970: none, not an error
  CHECK(utilisation.Report(req, std::nullopt).ok());
  req.set_month("2027-01");
  auto future = utilisation.Report(req, std::nullopt);
  CHECK(absl::IsInvalidArgument(future.status()));
  CHECK(future.status().message().find("has not begun") != std::string::npos);
  req.set_month("2026-11");
  req.set_trend_months(25);
  CHECK(absl::IsInvalidArgument(utilisation.Report(req, std::nullopt).status()));
}

TEST_CASE("utilisation: centers registered before the capacity history was kept get theirs from their documents "
          "[A7]",
          "[A7]") {
  auto store = jc::testing::MakeTestStore();
  jc::FakeClock clock(At("2026-11-01T00:00:00Z"));
  jc::registry::Registry registry(store.get(), &clock, {});
  REQUIRE(registry.Create(Center("bj", 10, 0)).ok());
  REQUIRE(store->Exec("DELETE FROM center_capacity").ok());  // as if registered before migration 27
  clock.Advance(absl::Hours(10));
  REQUIRE(registry.BackfillCapacityHistory().ok());
  REQUIRE(registry.BackfillCapacityHistory().ok());  // again: nothing more
  jc::accounting::Utilisation utilisation(store.get(), &clock);
  auto got = utilisation.Month("2026-11");
  REQUIRE(got.ok());
  REQUIRE(got->size() == 1);
  CHECK((*got)[0].resources(0).offered_hours() == Approx(100));  // from its registration on
}

TEST_CASE("utilisation: an operator flipping its center's capacity writes a step a minute at most, and a month's "
          "report reads its own steps and the one standing at its start [A7]",
          "[A7]") {
  auto store = jc::testing::MakeTestStore();
  jc::FakeClock clock(At("2026-10-31T12:00:00Z"));
  jc::registry::Registry registry(store.get(), &clock, {});
  REQUIRE(registry.Create(Center("bj", 10, 0)).ok());
  google::protobuf::FieldMask mask;
  mask.add_paths("capacity");
  for (int i = 0; i < 500; ++i) {
    v1::Center patch;
    patch.set_ai_center_id("bj");
    patch.mutable_capacity()->set_cpu(i % 2 == 0 ? 100 : 101);
    REQUIRE(registry.Update(patch, mask).ok());
    clock.Advance(absl::Milliseconds(10));
  }
  auto rows = store->Query("SELECT COUNT(*) FROM center_capacity WHERE center_id = 'bj'");
  REQUIRE(rows.ok());
  CHECK(*(*rows)[0][0] == "1");  // all within the minute of its registration: one step, the last value
  clock.Advance(absl::Hours(12));  // 11-01T00:00:05
  jc::accounting::Utilisation utilisation(store.get(), &clock);
  clock.Advance(absl::Hours(1) - absl::Seconds(5));
  auto got = utilisation.Month("2026-11");
  REQUIRE(got.ok());
  REQUIRE(got->size() == 1);
  CHECK((*got)[0].resources(0).offered_hours() == Approx(101));  // the step from October stands: 101 cores, 1 h
}
