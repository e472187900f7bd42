// Benchmark of issue 31 item 7: usage reports over millions of records on PostgreSQL.
// Writes N usage records (default 10 million) the way the job manager does — in batches
// through AppendUsage, which keeps the daily rollup and the billing sums in the same
// transaction — all ending in one month (the worst case for a monthly report), spread
// over 200 projects of 5 users each, 20 centers and 5 specs (two per project); then
// times what users ask:
//   - the month's report per project and center (the rollup), the figure the issue bounds
//     at one second;
//   - the same sums computed from the raw records (the peer: what a report costs without
//     the rollup), for the ratio;
//   - the month's settlement statement, one project's report per day, and one page of a
//     project's records.
// Prints figures; asserts nothing.
//   PG=$(scripts/pg.sh start /tmp/jc-bench-pg)
//   build/tests/bench/usage_report_bench "$PG" [records=10000000] [batch=5000]

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/store/group_commit.h"
#include "common/store/store.h"
#include "common/timestamp.h"
#include "services/accounting/settlement.h"
#include "services/accounting/usage_book.h"

namespace v1 = jointcloud::v1;

namespace {

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

template <typename Fn>
double Millis(Fn&& fn, int repeat = 3) {
  double best = 1e18;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PG_URI [records=10000000] [batch=5000]\n", argv[0]);
    return 2;
  }
  int64_t n = 10'000'000, batch = 5000;
  if (argc > 2) (void)absl::SimpleAtoi(argv[2], &n);
  if (argc > 3) (void)absl::SimpleAtoi(argv[3], &batch);
  auto store = jc::store::OpenStore(argv[1], absl::StrCat("usage_bench_", getpid()));
  if (!store.ok()) {
    std::fprintf(stderr, "store: %s\n", store.status().ToString().c_str());
    return 1;
  }
  const absl::Time month_start = absl::FromCivil(absl::CivilMonth(2026, 10), absl::UTCTimeZone());
  std::mt19937_64 rng(31);
  jc::store::GroupCommitter committer(store->get());
  auto t0 = std::chrono::steady_clock::now();
  double cpu0 = CpuSeconds();
  for (int64_t done = 0; done < n;) {
    std::vector<v1::UsageRecord> records;
    for (int64_t i = 0; i < batch && done < n; ++i, ++done) {
      v1::UsageRecord r;
      r.set_record_id(absl::StrCat("job-", done, "/0/0/0"));
      r.set_job_id(absl::StrCat("job-", done));
      // Five users per project, each project on two of the five specs, anywhere.
      const uint64_t project = rng() % 200;
      r.set_project(absl::StrCat("project-", project));
      r.set_user_name(absl::StrCat("user-", project * 5 + rng() % 5));
      r.set_ai_center_id(absl::StrCat("center-", rng() % 20));
      r.set_resource_spec_id(absl::StrCat("gpu-", 1 << ((project + rng() % 2) % 5)));
      r.set_outcome("succeeded");
      absl::Time end = month_start + absl::Seconds(static_cast<int64_t>(rng() % (30 * 86400)));
      double wall = 60 + static_cast<double>(rng() % 36000);
      *r.mutable_started_at() = jc::ToTimestamp(end - absl::Seconds(wall));
      *r.mutable_ended_at() = jc::ToTimestamp(end);
      *r.mutable_recorded_at() = jc::ToTimestamp(end);
      r.set_wall_seconds(wall);
      r.set_cpu_seconds(wall * 0.8);
      r.set_gpus(1);
      r.set_gpu_seconds(wall);
      r.set_memory_peak_mb(static_cast<int64_t>(rng() % 65536));
      r.set_price_per_hour(20);
      r.set_cost(20 * wall / 3600);
      r.set_energy_kwh(0.35 * wall / 3600);
      r.set_source("center");
      r.set_billing_month("2026-10");
      records.push_back(std::move(r));
    }
    // As the job manager writes them: through a group commit, whose transaction sends the
    // batch's rows as multi-row INSERTs.
    absl::Status written =
        committer.Commit([&](jc::store::Transaction& txn) { return jc::accounting::AppendUsage(txn, records); });
    if (!written.ok()) {
      std::fprintf(stderr, "appending records failed: %s\n", written.ToString().c_str());
      return 1;
    }
    if (done % 1'000'000 == 0) std::fprintf(stderr, "%lld records\n", static_cast<long long>(done));
  }
  double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double write_cpu = CpuSeconds() - cpu0;
  std::printf("%lld usage records written in batches of %lld: %.1f s (%.0f records/s), %.1f us of this "
              "process's CPU per record (PostgreSQL's own not counted)\n",
              static_cast<long long>(n), static_cast<long long>(batch), write_s, n / write_s, write_cpu * 1e6 / n);
  (void)(*store)->Exec("ANALYZE");

  jc::accounting::UsageBook book(store->get());
  v1::GetUsageReportRequest month;
  *month.mutable_from() = jc::ToTimestamp(month_start);
  *month.mutable_to() = jc::ToTimestamp(absl::FromCivil(absl::CivilMonth(2026, 11), absl::UTCTimeZone()));
  month.add_group_by("project");
  month.add_group_by("center");
  int rows = 0;
  double rollup_ms = Millis([&] {
    auto r = book.Report(month, std::nullopt);
    rows = r.ok() ? r->rows_size() : -1;
  });
  double raw_ms = Millis(
      [&] {
        auto r = (*store)->Query(
            "SELECT project, center_id, COUNT(*), SUM(CAST(doc::json->>'cost' AS DOUBLE PRECISION)) FROM usage_records "
            "WHERE ended_at >= $1 AND ended_at < $2 GROUP BY project, center_id",
            {absl::ToUnixMillis(month_start),
             absl::ToUnixMillis(absl::FromCivil(absl::CivilMonth(2026, 11), absl::UTCTimeZone()))});
        if (!r.ok()) std::fprintf(stderr, "raw: %s\n", r.status().ToString().c_str());
      },
      1);
  std::printf("monthly report per project and center (%d rows): %.1f ms from the monthly rollup (target < 1000 ms); "
              "the same sums from the raw records: %.0f ms (%.0fx)\n",
              rows, rollup_ms, raw_ms, raw_ms / std::max(0.001, rollup_ms));

  v1::GetUsageReportRequest daily = month;
  daily.clear_group_by();
  daily.set_project("project-7");
  daily.set_granularity("day");
  double daily_ms = Millis([&] { (void)book.Report(daily, std::nullopt); });
  jc::FakeClock clock(absl::FromCivil(absl::CivilDay(2026, 11, 5), absl::UTCTimeZone()));
  jc::accounting::Settlements settlements(store->get(), &clock);
  double statement_ms = Millis([&] { (void)settlements.Get("2026-10", "", {true, {}, {}}); });
  v1::ListUsageRecordsRequest page;
  page.set_project("project-7");
  page.set_page_size(100);
  double page_ms = Millis([&] { (void)book.List(page, std::nullopt); });
  std::printf("one project's month per day: %.1f ms; the month's settlement statement (every center x project): "
              "%.1f ms; a page of 100 of one project's records: %.1f ms\n",
              daily_ms, statement_ms, page_ms);
  return 0;
}
