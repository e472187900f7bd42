// Usage records in the store, the reports over them and settlement statements (issue 31),
// on the test store (SQLite, or the suite's PostgreSQL): a closed statement never changes,
// a record of a closed month is billed in the first month still open, and bad periods are
// refused without changing anything.

#include <catch2/catch.hpp>

#include "absl/time/time.h"
#include "common/timestamp.h"
#include "services/accounting/settlement.h"
#include "services/accounting/usage_book.h"
#include "tests/testing/test_store.h"

namespace v1 = jointcloud::v1;

namespace {

absl::Time At(const char* text) {
  absl::Time t;
  std::string error;
  REQUIRE(absl::ParseTime(absl::RFC3339_full, text, &t, &error));
  return t;
}

v1::UsageRecord Record(const std::string& id, const std::string& project, const std::string& center,
                       const char* ended, double cost) {
  v1::UsageRecord r;
  r.set_record_id(id);
  r.set_job_id(id.substr(0, id.find('/')));
  r.set_project(project);
  r.set_user_name("u");
  r.set_ai_center_id(center);
  r.set_resource_spec_id("gpu-1");
  r.set_outcome("succeeded");
  absl::Time end = At(ended);
  *r.mutable_started_at() = jc::ToTimestamp(end - absl::Hours(1));
  *r.mutable_ended_at() = jc::ToTimestamp(end);
  r.set_wall_seconds(3600);
  r.set_gpus(1);
  r.set_gpu_seconds(3600);
  r.set_cost(cost);
  r.set_billing_month(absl::FormatTime("%Y-%m", end, absl::UTCTimeZone()));
  return r;
}

absl::Status Append(jc::store::Store& store, std::vector<v1::UsageRecord> records) {
  auto txn = store.Begin();
  if (!txn.ok()) return txn.status();
  if (absl::Status s = jc::accounting::AppendUsage(**txn, records); !s.ok()) return s;
  return (*txn)->Commit();
}

}  // namespace

TEST_CASE("settlement: a closed month's statement never changes, a late record is billed in the first open month, "
          "and bad periods are refused [A7][C5]",
          "[A7][C5]") {
  auto store = jc::testing::MakeTestStore();
  jc::FakeClock clock(At("2026-11-05T00:00:00Z"));
  jc::accounting::Settlements settlements(store.get(), &clock);
  const jc::accounting::Settlements::Viewer all{true, {}, {}};
  REQUIRE(Append(*store, {Record("j1/0/0/0", "alpha", "bj", "2026-10-10T10:00:00Z", 20),
                          Record("j2/0/0/0", "alpha", "wh", "2026-10-20T10:00:00Z", 5),
                          Record("j3/0/0/0", "beta", "bj", "2026-10-31T23:00:00Z", 7),
                          Record("j4/0/0/0", "beta", "bj", "2026-11-02T10:00:00Z", 100)})
              .ok());
  // The same attempt again (a job manager metering it again after a crash): the stored
  // record stands, whatever the new one says, and nothing is counted twice. Before: the
  // write failed, and the job manager that carried it stepped down at every write (lost
  // and stranded jobs in the fault suite on PostgreSQL).
  CHECK(Append(*store, {Record("j1/0/0/0", "alpha", "bj", "2026-10-10T10:00:00Z", 999)}).ok());

  auto open = settlements.Get("2026-10", "", all);
  REQUIRE(open.ok());
  CHECK(open->status() == "open");
  REQUIRE(open->lines_size() == 3);  // bj/alpha, bj/beta, wh/alpha
  CHECK(open->lines(0).ai_center_id() == "bj");
  CHECK(open->lines(0).project() == "alpha");
  CHECK(open->total().cost() == Approx(32));
  CHECK(open->total().records() == 3);

  // November has not ended: it cannot close.
  auto early = settlements.Close("2026-11", "admin");
  REQUIRE(absl::IsInvalidArgument(early.status()));
  CHECK(early.status().message().find("has not ended") != std::string::npos);
  CHECK(absl::IsInvalidArgument(settlements.Close("Oct", "admin").status()));

  auto closed = settlements.Close("2026-10", "admin");
  REQUIRE(closed.ok());
  CHECK(closed->status() == "closed");
  CHECK(closed->closed_by() == "admin");
  CHECK(closed->digest().size() == 64);
  CHECK(closed->total().cost() == Approx(32));
  REQUIRE(closed->center_totals_size() == 2);
  CHECK(closed->center_totals(0).totals().cost() == Approx(27));  // bj: 20 + 7
  CHECK(absl::IsFailedPrecondition(settlements.Close("2026-10", "admin").status()));

  // A record of October that arrives now (its adapter was down) is billed in November.
  REQUIRE(Append(*store, {Record("j5/0/0/0", "alpha", "bj", "2026-10-30T10:00:00Z", 3)}).ok());
  auto again = settlements.Get("2026-10", "", all);
  REQUIRE(again.ok());
  CHECK(again->status() == "closed");
  CHECK(again->digest() == closed->digest());
  CHECK(again->total().cost() == Approx(32));
  auto november = settlements.Get("2026-11", "", all);
  REQUIRE(november.ok());
  CHECK(november->status() == "open");
  CHECK(november->first_month() == "2026-11");
  CHECK(november->total().cost() == Approx(103));
  CHECK(november->total().records() == 2);
  // Usage reports keep it on the day it ended.
  jc::accounting::UsageBook book(store.get());
  v1::GetUsageReportRequest req;
  *req.mutable_from() = jc::ToTimestamp(At("2026-10-01T00:00:00Z"));
  *req.mutable_to() = jc::ToTimestamp(At("2026-11-01T00:00:00Z"));
  req.add_group_by("project");
  auto report = book.Report(req, std::nullopt);
  INFO(report.status().ToString());
  REQUIRE(report.ok());
  CHECK(report->total().cost() == Approx(35));
  REQUIRE(report->rows_size() == 2);
  CHECK(report->rows(0).project() == "alpha");
  CHECK(report->rows(0).totals().cost() == Approx(28));

  // What a project member sees: its project's lines only; a center's operator: its center's.
  auto member = settlements.Get("2026-10", "", {false, {"beta"}, {}});
  REQUIRE(member.ok());
  REQUIRE(member->lines_size() == 1);
  CHECK(member->total().cost() == Approx(7));
  auto operator_view = settlements.Get("2026-10", "", {false, {}, {"wh"}});
  REQUIRE(operator_view.ok());
  REQUIRE(operator_view->lines_size() == 1);
  CHECK(operator_view->lines(0).ai_center_id() == "wh");
  auto none = settlements.Get("2026-10", "", {false, {}, {}});
  REQUIRE(none.ok());
  CHECK(none->lines_size() == 0);

  // Closing December first settles November with it, in one statement.
  clock.Advance(absl::Hours(24 * 60));
  auto december = settlements.Close("2026-12", "admin");
  REQUIRE(december.ok());
  CHECK(december->first_month() == "2026-11");
  CHECK(december->total().cost() == Approx(103));
  auto gone = settlements.Get("2026-11", "", all);
  CHECK(absl::IsNotFound(gone.status()));
  auto list = settlements.ListClosed();
  REQUIRE(list.ok());
  REQUIRE(list->size() == 2);
  CHECK((*list)[1].month() == "2026-12");
}

TEST_CASE("usage: a record appended twice in one write or two counts once, the first one standing [A7][C7]",
          "[A7][C7]") {
  auto store = jc::testing::MakeTestStore();
  jc::FakeClock clock(At("2026-11-05T00:00:00Z"));
  jc::accounting::Settlements settlements(store.get(), &clock);
  const jc::accounting::Settlements::Viewer all{true, {}, {}};
  REQUIRE(Append(*store, {Record("j5/0/0/0", "alpha", "wh", "2026-10-21T10:00:00Z", 4),
                          Record("j5/0/0/0", "alpha", "wh", "2026-10-21T10:00:00Z", 40)})
              .ok());
  REQUIRE(Append(*store, {Record("j5/0/0/0", "alpha", "wh", "2026-10-21T10:00:00Z", 400),
                          Record("j6/0/0/0", "alpha", "wh", "2026-10-22T10:00:00Z", 1)})
              .ok());
  auto october = settlements.Get("2026-10", "", all);
  REQUIRE(october.ok());
  CHECK(october->total().records() == 2);
  CHECK(october->total().cost() == Approx(5));
}
