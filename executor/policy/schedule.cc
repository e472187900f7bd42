#include "executor/policy/schedule.h"

#include <algorithm>
#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "executor/policy/time_window.h"

namespace jc::nexec {
namespace {

struct Field {
  const char* name;
  int low, high;
  const char* const* names;  // names for low.. (months from 1, weekdays from 0); or null
};

constexpr const char* kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec", nullptr};
constexpr const char* kWeekdayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", nullptr};

absl::StatusOr<int> Value(absl::string_view text, const Field& f, absl::string_view schedule) {
  int n = 0;
  if (absl::SimpleAtoi(text, &n)) {
    if (n < f.low || n > f.high) {
      return absl::InvalidArgumentError(absl::StrCat("schedule \"", schedule, "\": ", f.name, " ", n, " is not ", f.low,
                                                     " to ", f.high));
    }
    return n;
  }
  if (f.names != nullptr) {
    const std::string lower = absl::AsciiStrToLower(text);
    for (int i = 0; f.names[i] != nullptr; ++i) {
      if (lower == f.names[i]) return f.low == 1 ? i + 1 : i;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("schedule \"", schedule, "\": ", f.name, " \"", text, "\" is not a value"));
}

// One cron field into the set of its values; `any` when it is `*` (or `?`).
template <size_t N>
absl::Status ParseField(absl::string_view text, const Field& f, absl::string_view schedule, std::bitset<N>* out,
                        bool* any) {
  *any = text == "*" || text == "?";
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int step = 1;
    absl::string_view range = item;
    if (auto slash = item.find('/'); slash != absl::string_view::npos) {
      range = item.substr(0, slash);
      if (!absl::SimpleAtoi(item.substr(slash + 1), &step) || step < 1) {
        return absl::InvalidArgumentError(absl::StrCat("schedule \"", schedule, "\": ", f.name, " step in \"", item,
                                                       "\" is not a positive number"));
      }
    }
    int low = f.low, high = f.high;
    if (range != "*" && range != "?") {
      std::vector<absl::string_view> ends = absl::StrSplit(range, '-');
      if (ends.size() > 2 || ends[0].empty()) {
        return absl::InvalidArgumentError(absl::StrCat("schedule \"", schedule, "\": ", f.name, " \"", item,
                                                       "\" is not a value, range or step"));
      }
      auto a = Value(ends[0], f, schedule);
      if (!a.ok()) return a.status();
      low = high = *a;
      if (ends.size() == 2) {
        auto b = Value(ends[1], f, schedule);
        if (!b.ok()) return b.status();
        high = *b;
        if (high < low) {
          return absl::InvalidArgumentError(absl::StrCat("schedule \"", schedule, "\": ", f.name, " range \"", range,
                                                         "\" ends before it begins"));
        }
      } else if (item.find('/') != absl::string_view::npos) {
        high = f.high;  // "10/5": from 10 on, every 5
      }
    }
    for (int v = low; v <= high; v += step) out->set(static_cast<size_t>(v == 7 && N == 7 ? 0 : v));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Schedule> Schedule::Parse(absl::string_view raw) {
  Schedule s;
  const std::string text(absl::StripAsciiWhitespace(raw));
  s.text_ = text;
  if (text.empty()) {
    return absl::InvalidArgumentError("schedule is empty: expected cron fields (\"0 2 * * *\"), @daily or a time (2:00)");
  }
  static const std::array<std::pair<const char*, const char*>, 7> kMacros = {{{"@hourly", "0 * * * *"},
                                                                              {"@daily", "0 0 * * *"},
                                                                              {"@midnight", "0 0 * * *"},
                                                                              {"@weekly", "0 0 * * 0"},
                                                                              {"@monthly", "0 0 1 * *"},
                                                                              {"@yearly", "0 0 1 1 *"},
                                                                              {"@annually", "0 0 1 1 *"}}};
  std::string cron = text;
  if (text[0] == '@') {
    auto macro = std::find_if(kMacros.begin(), kMacros.end(), [&](const auto& m) { return text == m.first; });
    if (macro == kMacros.end()) {
      return absl::InvalidArgumentError(absl::StrCat("schedule \"", text, "\": unknown; expected @hourly, @daily, "
                                                     "@midnight, @weekly, @monthly, @yearly or @annually"));
    }
    cron = macro->second;
  }
  std::vector<std::string> fields = absl::StrSplit(cron, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (text.find(':') != std::string::npos) {
    // Time points, as run windows write their ends.
    for (const std::string& point : fields) {
      auto p = ParseTimePoint(point, text);
      if (!p.ok()) return p.status();
      Entry e;
      e.seconds.set(0);
      e.minutes.set(static_cast<size_t>(p->minute));
      e.hours.set(static_cast<size_t>(p->hour));
      e.days.set();
      e.months.set();
      e.weekdays.set();
      if (p->day >= 0) {
        e.weekdays.reset();
        e.weekdays.set(static_cast<size_t>(p->day));
        e.any_weekday = false;
      }
      s.entries_.push_back(e);
    }
  } else {
    if (fields.size() != 5 && fields.size() != 6) {
      return absl::InvalidArgumentError(absl::StrCat("schedule \"", text, "\": expected 5 cron fields (minute hour "
                                                     "day-of-month month day-of-week) or 6 with seconds first, got ",
                                                     fields.size()));
    }
    if (fields.size() == 5) fields.insert(fields.begin(), "0");
    static const Field kFields[] = {{"second", 0, 59, nullptr},      {"minute", 0, 59, nullptr},
                                    {"hour", 0, 23, nullptr},        {"day of month", 1, 31, nullptr},
                                    {"month", 1, 12, kMonthNames},   {"day of week", 0, 7, kWeekdayNames}};
    Entry e;
    bool unused = false;
    absl::Status st = ParseField(fields[0], kFields[0], text, &e.seconds, &unused);
    if (st.ok()) st = ParseField(fields[1], kFields[1], text, &e.minutes, &unused);
    if (st.ok()) st = ParseField(fields[2], kFields[2], text, &e.hours, &unused);
    if (st.ok()) st = ParseField(fields[3], kFields[3], text, &e.days, &e.any_day);
    if (st.ok()) st = ParseField(fields[4], kFields[4], text, &e.months, &unused);
    if (st.ok()) st = ParseField(fields[5], kFields[5], text, &e.weekdays, &e.any_weekday);
    if (!st.ok()) return st;
    s.entries_.push_back(e);
  }
  // Refuse what is never due, such as February 30th (February 29th is due in leap years).
  const absl::Time reference = absl::FromCivil(absl::CivilSecond(2024, 1, 1, 0, 0, 0), absl::UTCTimeZone());
  if (s.Next(reference, absl::UTCTimeZone()) == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(absl::StrCat("schedule \"", text, "\" is never due (no such date)"));
  }
  return s;
}

absl::Time Schedule::Next(absl::Time t, absl::TimeZone tz) const {
  absl::Time best = absl::InfiniteFuture();
  for (const Entry& e : entries_) best = std::min(best, NextOf(e, t, tz));
  return best;
}

absl::Time Schedule::NextOf(const Entry& e, absl::Time t, absl::TimeZone tz) {
  const absl::CivilSecond start = absl::ToCivilSecond(t, tz) + 1;  // strictly after
  const absl::CivilDay first_day(start);
  for (int d = 0; d < 8 * 366; ++d) {
    const absl::CivilDay day = first_day + d;
    if (!e.months.test(static_cast<size_t>(day.month()))) continue;
    const bool dom = e.days.test(static_cast<size_t>(day.day()));
    const absl::Weekday weekday = absl::GetWeekday(day);  // absl counts from Monday, cron from Sunday
    const bool dow = e.weekdays.test(weekday == absl::Weekday::sunday ? 0 : static_cast<size_t>(weekday) + 1);
    // Both restricted: either matches (cron's rule); otherwise the restricted one decides.
    const bool due_day = e.any_day && e.any_weekday ? true : e.any_day ? dow : e.any_weekday ? dom : (dom || dow);
    if (!due_day) continue;
    const bool today = d == 0;
    for (int h = today ? start.hour() : 0; h < 24; ++h) {
      if (!e.hours.test(static_cast<size_t>(h))) continue;
      const bool this_hour = today && h == start.hour();
      for (int m = this_hour ? start.minute() : 0; m < 60; ++m) {
        if (!e.minutes.test(static_cast<size_t>(m))) continue;
        const bool this_minute = this_hour && m == start.minute();
        for (int s = this_minute ? start.second() : 0; s < 60; ++s) {
          if (e.seconds.test(static_cast<size_t>(s))) {
            return absl::FromCivil(absl::CivilSecond(day.year(), day.month(), day.day(), h, m, s), tz);
          }
        }
      }
    }
  }
  return absl::InfiniteFuture();
}

}  // namespace jc::nexec
