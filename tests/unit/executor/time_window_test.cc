// Time windows (run windows, limit windows, timed jobs) as the SkyForm seeds write them.

#include <catch2/catch.hpp>

#include "executor/policy/time_window.h"

using jc::nexec::TimeWindows;

namespace {

const absl::TimeZone kUtc = absl::UTCTimeZone();

// 2026-11-23 is a Monday.
absl::Time At(int day_of_month, int hour, int minute, int second = 0) {
  return absl::FromCivil(absl::CivilSecond(2026, 11, day_of_month, hour, minute, second), kUtc);
}

TimeWindows MustParse(const std::string& text) {
  auto w = TimeWindows::Parse(text);
  REQUIRE(w.ok());
  return *w;
}

}  // namespace

TEST_CASE("a weekly window runs from its first day's hour to its last day's, wrapping the week", "[B6][B7]") {
  // The seeds' example: Monday 8:00 to Friday 18:00, and what it leaves out.
  TimeWindows work = MustParse("1:8:0-5:18:0");
  TimeWindows rest = MustParse("5:18:01-1:7:59");
  struct Case {
    absl::Time t;
    bool work;
  };
  for (const Case& c : {Case{At(23, 7, 59), false}, Case{At(23, 8, 0), true}, Case{At(25, 3, 0), true},
                        Case{At(27, 18, 0, 59), true}, Case{At(27, 18, 1), false},
                        Case{At(28, 12, 0), false}, Case{At(29, 23, 0), false}, Case{At(30, 8, 0), true}}) {
    CAPTURE(absl::FormatTime(c.t, kUtc));
    CHECK(work.Contains(c.t, kUtc) == c.work);
    CHECK(rest.Contains(c.t, kUtc) == !c.work);
  }
}

TEST_CASE("a daily window holds every day and may wrap midnight", "[B6][B7]") {
  TimeWindows office = MustParse("9:00-18:00");
  CHECK_FALSE(office.Contains(At(24, 8, 59), kUtc));
  CHECK(office.Contains(At(24, 9, 0), kUtc));
  CHECK(office.Contains(At(29, 18, 0), kUtc));  // Sunday too
  CHECK_FALSE(office.Contains(At(29, 18, 1), kUtc));

  TimeWindows night = MustParse("20:00-6:00");
  CHECK(night.Contains(At(24, 23, 30), kUtc));
  CHECK(night.Contains(At(25, 5, 59), kUtc));
  CHECK_FALSE(night.Contains(At(25, 12, 0), kUtc));

  TimeWindows hours = MustParse("8-9");  // hours alone: 8:00 to 9:00
  CHECK(hours.Contains(At(24, 9, 0), kUtc));
  CHECK_FALSE(hours.Contains(At(24, 9, 1), kUtc));
  CHECK_FALSE(hours.Contains(At(24, 7, 59), kUtc));
}

TEST_CASE("several windows: open in any of them", "[B6][B7]") {
  TimeWindows w = MustParse("  1:8:0-1:12:0   0:0:0-0:23:59 ");
  CHECK(w.text() == "1:8:0-1:12:0 0:0:0-0:23:59");
  CHECK(w.Contains(At(23, 10, 0), kUtc));   // Monday morning
  CHECK(w.Contains(At(29, 15, 0), kUtc));   // Sunday
  CHECK_FALSE(w.Contains(At(24, 10, 0), kUtc));  // Tuesday
  CHECK(TimeWindows().Contains(At(24, 10, 0), kUtc));  // none: always open
  CHECK(MustParse("").always_open());
}

TEST_CASE("the next change of a window is the minute it opens or the one after it closes", "[B6][B7]") {
  TimeWindows work = MustParse("1:8:0-5:18:0");
  CHECK(work.NextChange(At(28, 12, 0), kUtc) == At(30, 8, 0));       // Saturday: opens Monday
  CHECK(work.NextChange(At(24, 12, 0, 30), kUtc) == At(27, 18, 1));   // Tuesday: closes Friday
  TimeWindows office = MustParse("9:00-18:00 12:00-20:00");
  CHECK(office.NextChange(At(24, 10, 0), kUtc) == At(24, 20, 1));    // the overlap is one stretch
  CHECK(MustParse("0:00-23:59").NextChange(At(24, 10, 0), kUtc) == absl::InfiniteFuture());
  CHECK(TimeWindows().NextChange(At(24, 10, 0), kUtc) == absl::InfiniteFuture());
}

TEST_CASE("malformed windows are refused with what is wrong", "[B6][B7]") {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{"8:00", "expected begin-end"}, Case{"8:00-18:00-19:00", "expected begin-end"},
                        Case{"7:8:0-5:18:0", "day 7"}, Case{"24:00-1:00", "hour 24"},
                        Case{"8:60-9:00", "minute 60"}, Case{"1:8:0-18:00", "both ends"},
                        Case{"a-b", "is not a time"}, Case{"8:-9", "is not a time"},
                        Case{"1:2:3:4-5", "is not a time"}, Case{"-8:00-9:00", "expected begin-end"}}) {
    CAPTURE(c.text);
    auto w = TimeWindows::Parse(c.text);
    REQUIRE_FALSE(w.ok());
    CHECK(w.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(w.status().message()), Catch::Contains(c.says));
  }
}
