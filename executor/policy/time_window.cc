#include "executor/policy/time_window.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace jc::nexec {
namespace {

constexpr int kMinutesPerDay = 24 * 60;
constexpr int kMinutesPerWeek = 7 * kMinutesPerDay;

struct End {
  bool has_day = false;
  int minute = 0;  // of the day, or of the week when has_day
};

absl::StatusOr<End> ParseEnd(absl::string_view text, absl::string_view window) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("time window \"", window, "\": ", what,
                                                   " (expected [day:]hour[:minute], e.g. 1:8:0 or 18:30)"));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() > 3 || text.empty()) return bad(absl::StrCat("\"", text, "\" is not a time"));
  std::vector<int> v;
  for (absl::string_view p : parts) {
    int n = 0;
    if (p.empty() || p.size() > 2 || !absl::SimpleAtoi(p, &n) || n < 0) {
      return bad(absl::StrCat("\"", text, "\" is not a time"));
    }
    v.push_back(n);
  }
  End e;
  int day = 0, hour = 0, minute = 0;
  if (v.size() == 3) {
    e.has_day = true;
    day = v[0], hour = v[1], minute = v[2];
  } else {
    hour = v[0];
    if (v.size() == 2) minute = v[1];
  }
  if (day > 6) return bad(absl::StrCat("day ", day, " is not 0 (Sunday) to 6 (Saturday)"));
  if (hour > 23) return bad(absl::StrCat("hour ", hour, " is not 0 to 23"));
  if (minute > 59) return bad(absl::StrCat("minute ", minute, " is not 0 to 59"));
  e.minute = day * kMinutesPerDay + hour * 60 + minute;
  return e;
}

// Minutes from `from` forward to `to` on a circle of `period` minutes, 1..period.
int Forward(int from, int to, int period) {
  int d = ((to - from) % period + period) % period;
  return d == 0 ? period : d;
}

}  // namespace

absl::StatusOr<TimePoint> ParseTimePoint(absl::string_view text, absl::string_view context) {
  auto end = ParseEnd(text, context);
  if (!end.ok()) return end.status();
  TimePoint p;
  int minute = end->minute;
  if (end->has_day) {
    p.day = minute / kMinutesPerDay;
    minute %= kMinutesPerDay;
  }
  p.hour = minute / 60;
  p.minute = minute % 60;
  return p;
}

absl::StatusOr<TimeWindows> TimeWindows::Parse(absl::string_view text) {
  TimeWindows out;
  std::vector<std::string> kept;
  for (absl::string_view w : absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    std::vector<absl::string_view> ends = absl::StrSplit(w, '-');
    if (ends.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("time window \"", w, "\": expected begin-end, e.g. 8:00-18:00 or 1:8:0-5:18:0"));
    }
    auto begin = ParseEnd(ends[0], w);
    if (!begin.ok()) return begin.status();
    auto end = ParseEnd(ends[1], w);
    if (!end.ok()) return end.status();
    if (begin->has_day != end->has_day) {
      return absl::InvalidArgumentError(
          absl::StrCat("time window \"", w, "\": both ends name a day (day:hour:minute) or neither does"));
    }
    out.windows_.push_back(Window{begin->has_day, begin->minute, end->minute});
    kept.emplace_back(w);
  }
  out.text_ = absl::StrJoin(kept, " ");
  return out;
}

bool TimeWindows::InWindow(const Window& w, int minute_of_day, int minute_of_week) {
  int m = w.weekly ? minute_of_week : minute_of_day;
  if (w.begin <= w.end) return m >= w.begin && m <= w.end;
  return m >= w.begin || m <= w.end;  // wraps midnight or the end of the week
}

bool TimeWindows::Contains(absl::Time t, absl::TimeZone tz) const {
  if (windows_.empty()) return true;
  const absl::CivilMinute cm = absl::ToCivilMinute(t, tz);
  const int minute_of_day = cm.hour() * 60 + cm.minute();
  const int weekday = (static_cast<int>(absl::GetWeekday(absl::CivilDay(cm))) + 1) % 7;  // Sunday = 0
  const int minute_of_week = weekday * kMinutesPerDay + minute_of_day;
  for (const Window& w : windows_) {
    if (InWindow(w, minute_of_day, minute_of_week)) return true;
  }
  return false;
}

absl::Time TimeWindows::NextChange(absl::Time t, absl::TimeZone tz) const {
  if (windows_.empty()) return absl::InfiniteFuture();
  const absl::CivilMinute now = absl::ToCivilMinute(t, tz);
  const int minute_of_day = now.hour() * 60 + now.minute();
  const int weekday = (static_cast<int>(absl::GetWeekday(absl::CivilDay(now))) + 1) % 7;
  const int minute_of_week = weekday * kMinutesPerDay + minute_of_day;
  // Contains can only change where a window begins or just after one ends: try those
  // minutes in time order and keep the first where the answer differs from now's.
  std::vector<int> ahead;  // minutes from now
  for (const Window& w : windows_) {
    int period = w.weekly ? kMinutesPerWeek : kMinutesPerDay;
    int m = w.weekly ? minute_of_week : minute_of_day;
    for (int boundary : {w.begin, (w.end + 1) % period}) {
      for (int d = Forward(m, boundary, period); d <= kMinutesPerWeek; d += period) ahead.push_back(d);
    }
  }
  std::sort(ahead.begin(), ahead.end());
  const bool open = Contains(t, tz);
  for (int d : ahead) {
    absl::Time at = absl::FromCivil(now + d, tz);
    if (Contains(at, tz) != open) return at;
  }
  return absl::InfiniteFuture();
}

}  // namespace jc::nexec
