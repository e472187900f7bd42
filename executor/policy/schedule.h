#pragma once

// When a timed job's runs are due (SPEC B5, SkyForm AIP's 定时作业). Three ways to write it:
//
//   cron: "minute hour day-of-month month day-of-week", e.g. "0 2 * * *" (02:00 daily),
//         "*/15 9-17 * * 1-5" (every quarter hour of office hours); each field a list of
//         values, ranges and steps (`1,15`, `1-5`, `*/2`, `10-40/10`); months and days
//         also by name (JAN, MON); day of week 0 or 7 is Sunday. When both day fields are
//         restricted a day matching either is due, as cron has it.
//   cron with seconds: six fields, seconds first ("*/10 * * * * *": every ten seconds).
//   @hourly, @daily (= @midnight), @weekly, @monthly, @yearly (= @annually).
//   time points as run windows write their ends (time_window.h): "2:00" every day at
//         2:00, "1:8:0" Mondays at 8:00; several separated by spaces.
//
// Times are read in the master's time zone.

#include <bitset>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace jc::nexec {

class Schedule {
 public:
  // InvalidArgument naming the field and the fault; a schedule that is never due (30 2 * *,
  // "February 30th") is refused too.
  static absl::StatusOr<Schedule> Parse(absl::string_view text);
  // The first due time strictly after `t`; InfiniteFuture when there is none within
  // eight years.
  absl::Time Next(absl::Time t, absl::TimeZone tz) const;
  const std::string& text() const { return text_; }

 private:
  struct Entry {
    std::bitset<60> seconds, minutes;
    std::bitset<24> hours;
    std::bitset<32> days;    // of the month, 1..31
    std::bitset<13> months;  // 1..12
    std::bitset<7> weekdays; // 0 = Sunday
    bool any_day = true, any_weekday = true;
  };
  static absl::Time NextOf(const Entry& e, absl::Time t, absl::TimeZone tz);
  std::vector<Entry> entries_;
  std::string text_;
};

}  // namespace jc::nexec
