// Timed jobs' schedules (SPEC B5): cron fields, macros and run-window time points.

#include <catch2/catch.hpp>

#include "executor/policy/schedule.h"

using jc::nexec::Schedule;

namespace {

const absl::TimeZone kUtc = absl::UTCTimeZone();

// 2026-11-23 is a Monday.
absl::Time At(int month, int day, int hour, int minute, int second = 0, int year = 2026) {
  return absl::FromCivil(absl::CivilSecond(year, month, day, hour, minute, second), kUtc);
}

Schedule MustParse(const std::string& text) {
  auto s = Schedule::Parse(text);
  INFO(text << ": " << s.status());
  REQUIRE(s.ok());
  return *s;
}

std::string Civil(absl::Time t) { return absl::FormatTime("%Y-%m-%d %a %H:%M:%S", t, kUtc); }

}  // namespace

TEST_CASE("a cron schedule is next due at the first matching second after now", "[B5]") {
  const absl::Time now = At(11, 23, 10, 7, 30);  // Monday 10:07:30
  struct Case {
    const char* schedule;
    const char* next;
  } cases[] = {
      {"0 2 * * *", "2026-11-24 Tue 02:00:00"},
      {"*/15 9-17 * * 1-5", "2026-11-23 Mon 10:15:00"},
      {"*/15 9-17 * * MON-FRI", "2026-11-23 Mon 10:15:00"},
      {"7 10 * * *", "2026-11-24 Tue 10:07:00"},  // 10:07:00 today has passed
      {"8 10 * * *", "2026-11-23 Mon 10:08:00"},
      {"0 0 1 * *", "2026-12-01 Tue 00:00:00"},
      {"0 12 * * 0", "2026-11-29 Sun 12:00:00"},
      {"0 12 * * 7", "2026-11-29 Sun 12:00:00"},  // 7 is Sunday too
      {"0 12 * jan *", "2027-01-01 Fri 12:00:00"},
      // Both day fields restricted: the 1st of a month or any Friday, whichever comes first.
      {"0 0 1 * 5", "2026-11-27 Fri 00:00:00"},
      {"0 0 29 2 *", "2028-02-29 Tue 00:00:00"},  // leap years only
      {"10,40 * * * *", "2026-11-23 Mon 10:10:00"},
      {"30/10 * * * *", "2026-11-23 Mon 10:30:00"},
      {"*/10 * * * * *", "2026-11-23 Mon 10:07:40"},  // six fields: seconds first
      {"@hourly", "2026-11-23 Mon 11:00:00"},
      {"@daily", "2026-11-24 Tue 00:00:00"},
      {"@weekly", "2026-11-29 Sun 00:00:00"},
      {"@monthly", "2026-12-01 Tue 00:00:00"},
      {"@yearly", "2027-01-01 Fri 00:00:00"},
      // Time points as run windows write them.
      {"2:00", "2026-11-24 Tue 02:00:00"},
      {"10:30", "2026-11-23 Mon 10:30:00"},
      {"1:8:0", "2026-11-30 Mon 08:00:00"},
      {"5:17:30 3:9:0", "2026-11-25 Wed 09:00:00"},
  };
  for (const auto& c : cases) {
    INFO(c.schedule);
    CHECK(Civil(MustParse(c.schedule).Next(now, kUtc)) == c.next);
  }
  // Consecutive runs follow one another.
  Schedule every = MustParse("*/20 * * * *");
  absl::Time t = every.Next(now, kUtc);
  CHECK(Civil(t) == "2026-11-23 Mon 10:20:00");
  t = every.Next(t, kUtc);
  CHECK(Civil(t) == "2026-11-23 Mon 10:40:00");
  t = every.Next(t, kUtc);
  CHECK(Civil(t) == "2026-11-23 Mon 11:00:00");
}

TEST_CASE("a schedule is read in the master's time zone", "[B5]") {
  absl::TimeZone shanghai;
  REQUIRE(absl::LoadTimeZone("Asia/Shanghai", &shanghai));
  // 02:00 in Shanghai is 18:00 UTC the day before.
  Schedule s = MustParse("0 2 * * *");
  CHECK(Civil(s.Next(At(11, 23, 12, 0), shanghai)) == "2026-11-23 Mon 18:00:00");
}

TEST_CASE("malformed schedules are refused with what is wrong", "[B5]") {
  const std::pair<const char*, const char*> bad[] = {
      {"", "schedule is empty"},
      {"* * *", "expected 5 cron fields"},
      {"60 * * * *", "minute 60 is not 0 to 59"},
      {"0 24 * * *", "hour 24 is not 0 to 23"},
      {"0 0 0 * *", "day of month 0 is not 1 to 31"},
      {"0 0 * 13 *", "month 13 is not 1 to 12"},
      {"0 0 * * 8", "day of week 8 is not 0 to 7"},
      {"*/0 * * * *", "minute step in \"*/0\" is not a positive number"},
      {"5-1 * * * *", "minute range \"5-1\" ends before it begins"},
      {"x * * * *", "minute \"x\" is not a value"},
      {"0 0 * * funday", "day of week \"funday\" is not a value"},
      {"0 0 30 2 *", "is never due (no such date)"},
      {"@fortnightly", "unknown; expected @hourly"},
      {"25:00", "hour 25 is not 0 to 23"},
  };
  for (const auto& [text, message] : bad) {
    auto s = Schedule::Parse(text);
    INFO(text);
    REQUIRE_FALSE(s.ok());
    CHECK(std::string(s.status().message()).find(message) != std::string::npos);
  }
  CHECK(Schedule::Parse("1:8").ok());  // 01:08 every day
}
