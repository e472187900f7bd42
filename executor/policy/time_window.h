#pragma once

// Time windows as LSF and SkyForm AIP write them (SPEC B5, B6, B7): a queue's run window,
// a limit that holds only at some hours, a timed job's schedule. One parser for all.
//
// A window is `begin-end`, each end `[day:]hour[:minute]`, days 0-6 with 0 = Sunday:
//   "8:00-18:00"             every day from 8:00 to 18:00
//   "1:8:0-5:18:0"           Monday 8:00 to Friday 18:00 (one stretch, not five days)
//   "20:00-6:00"             every night (a window may wrap midnight, or the week's end)
//   "1:8:0-5:18:0 0:0-0:23:59"  several windows, separated by spaces: open in any of them
// Both ends of a window name a day, or neither. The end minute is inside the window, so
// "5:18:01-1:7:59" is exactly what "1:8:0-5:18:0" leaves out.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace jc::nexec {

// One time point `[day:]hour[:minute]` as a window's end is written ("1:8:0", "18:30"):
// a timed job's schedule may list them. InvalidArgument names `context` and the fault.
struct TimePoint {
  int day = -1;  // 0 (Sunday) to 6; -1: every day
  int hour = 0;
  int minute = 0;
};
absl::StatusOr<TimePoint> ParseTimePoint(absl::string_view text, absl::string_view context);

class TimeWindows {
 public:
  // No windows: always open.
  TimeWindows() = default;
  // InvalidArgument naming the window and what is wrong with it.
  static absl::StatusOr<TimeWindows> Parse(absl::string_view text);

  bool always_open() const { return windows_.empty(); }
  bool Contains(absl::Time t, absl::TimeZone tz) const;
  // The first minute after `t` at which Contains changes; InfiniteFuture when it never
  // does (no windows, or windows that cover every minute).
  absl::Time NextChange(absl::Time t, absl::TimeZone tz) const;
  // The text it was parsed from, normalized to single spaces.
  const std::string& text() const { return text_; }

 private:
  struct Window {
    bool weekly = false;  // the ends name days: minutes of the week, else of the day
    int begin = 0;        // minute of the day or week
    int end = 0;          // inclusive
  };
  static bool InWindow(const Window& w, int minute_of_day, int minute_of_week);

  std::vector<Window> windows_;
  std::string text_;
};

}  // namespace jc::nexec
