#include "services/accounting/utilisation.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "common/quantity.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "jointcloud/v1/catalog.pb.h"

namespace jc::accounting {
namespace {

constexpr int kDefaultTrendMonths = 5;
constexpr int kMaxTrendMonths = 24;

double Number(const std::optional<std::string>& column) {
  double v = 0;
  return column.has_value() && absl::SimpleAtod(*column, &v) ? v : 0;
}

int64_t Integer(const std::optional<std::string>& column) {
  int64_t v = 0;
  return column.has_value() && absl::SimpleAtoi(*column, &v) ? v : 0;
}

struct Offered {
  double cpu_hours = 0, gpu_hours = 0;
};

struct Used {
  double cpu_hours = 0, measured_cpu_hours = 0, gpu_hours = 0, revenue = 0;
  int64_t records = 0;
};

v1::ResourceUtilisation Resource(const std::string& name, double offered, double used) {
  v1::ResourceUtilisation r;
  r.set_resource(name);
  r.set_offered_hours(offered);
  r.set_used_hours(used);
  r.set_idle_hours(std::max(0.0, offered - used));
  r.set_ratio(offered > 0 ? used / offered : 0);
  return r;
}

// "2026-11" and only that: absl's parser also takes "2026-1", " 2026-12" and years far
// outside anything recorded (helper-52 F6).
absl::StatusOr<absl::CivilMonth> ParseMonthText(const std::string& text) {
  static const std::regex* shape = new std::regex("[0-9]{4}-[0-9]{2}");
  absl::CivilMonth m;
  if (!std::regex_match(text, *shape) || !absl::ParseCivilTime(text, &m) || m.year() < 1970) {
    return absl::InvalidArgumentError(absl::StrCat("month: \"", text.substr(0, 40), "\" is not a month (2026-11)"));
  }
  return m;
}

}  // namespace

absl::StatusOr<std::map<std::string, double>> Utilisation::SpecCpus() {
  // Each spec's CPU count, from the catalog (a spec removed since: its measured CPU stands in).
  std::map<std::string, double> cpus_of_spec;
  JC_ASSIGN_OR_RETURN(store::Rows specs, store_->Query("SELECT id, doc FROM resource_specs"));
  for (const auto& row : specs) {
    auto spec = store::DecodeDoc<v1::ResourceSpec>(row[1]);
    if (!spec.ok()) continue;
    auto cpu = spec->resource_quantity().find("cpu");
    if (cpu == spec->resource_quantity().end()) continue;
    auto q = Quantity::Parse(cpu->second);
    if (q.ok()) cpus_of_spec[row[0].value_or("")] = static_cast<double>(q->milli()) / Quantity::kMilliPerUnit;
  }
  return cpus_of_spec;
}

absl::StatusOr<std::vector<v1::CenterUtilisation>> Utilisation::Month(const std::string& month) {
  JC_ASSIGN_OR_RETURN(auto cpus_of_spec, SpecCpus());
  return Month(month, cpus_of_spec);
}

absl::StatusOr<std::vector<v1::CenterUtilisation>> Utilisation::Month(
    const std::string& month, const std::map<std::string, double>& cpus_of_spec) {
  JC_ASSIGN_OR_RETURN(absl::CivilMonth m, ParseMonthText(month));
  const absl::Time from = absl::FromCivil(m, absl::UTCTimeZone());
  const absl::Time end = absl::FromCivil(m + 1, absl::UTCTimeZone());
  const absl::Time now = clock_->Now();
  const absl::Time to = std::min(end, now);
  const bool partial = now < end;

  // Offered: each center's capacity steps, integrated over [from, to).
  std::map<std::string, Offered> offered;
  // The month's steps, and each center's last one before it (what stood at its start).
  JC_ASSIGN_OR_RETURN(store::Rows steps,
                      store_->Query("SELECT center_id, effective_us, cpu, gpu FROM center_capacity c WHERE "
                                    "effective_us < $1 AND (effective_us >= $2 OR effective_us = (SELECT "
                                    "MAX(effective_us) FROM center_capacity b WHERE b.center_id = c.center_id AND "
                                    "b.effective_us < $2)) ORDER BY center_id, effective_us",
                                    {absl::ToUnixMicros(to), absl::ToUnixMicros(from)}));
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string center = steps[i][0].value_or("");
    const absl::Time start = absl::FromUnixMicros(Integer(steps[i][1]));
    const bool last = i + 1 == steps.size() || steps[i + 1][0].value_or("") != center;
    const absl::Time stop = last ? to : absl::FromUnixMicros(Integer(steps[i + 1][1]));
    const absl::Time a = std::max(start, from), b = std::min(stop, to);
    Offered& o = offered[center];  // a center registered in the month with nothing yet is listed too
    if (b <= a) continue;
    const double hours = absl::ToDoubleHours(b - a);
    o.cpu_hours += hours * static_cast<double>(Integer(steps[i][2]));
    o.gpu_hours += hours * static_cast<double>(Integer(steps[i][3]));
  }
  // Centers whose history ended (removed) before the month offered nothing in it.
  for (auto it = offered.begin(); it != offered.end();) {
    it = it->second.cpu_hours == 0 && it->second.gpu_hours == 0 ? offered.erase(it) : std::next(it);
  }

  // Used: the monthly rollup of the records that ended in the month, by center and spec.
  JC_ASSIGN_OR_RETURN(store::Rows usage,
                      store_->Query("SELECT center_id, spec_id, SUM(records), SUM(wall_seconds), SUM(cpu_seconds), "
                                    "SUM(gpu_seconds), SUM(cost) FROM usage_monthly WHERE month = $1 "
                                    "GROUP BY center_id, spec_id",
                                    {month}));
  std::map<std::string, Used> used;
  for (const auto& row : usage) {
    Used& u = used[row[0].value_or("")];
    const double wall = Number(row[3]), cpu_seconds = Number(row[4]);
    auto spec = cpus_of_spec.find(row[1].value_or(""));
    u.records += Integer(row[2]);
    u.cpu_hours += (spec != cpus_of_spec.end() ? spec->second * wall : cpu_seconds) / 3600.0;
    u.measured_cpu_hours += cpu_seconds / 3600.0;
    u.gpu_hours += Number(row[5]) / 3600.0;
    u.revenue += Number(row[6]);
  }

  std::set<std::string> centers;
  for (const auto& [id, _] : offered) centers.insert(id);
  for (const auto& [id, _] : used) centers.insert(id);
  std::vector<v1::CenterUtilisation> out;
  for (const std::string& id : centers) {
    const Offered o = offered.count(id) ? offered[id] : Offered{};
    const Used u = used.count(id) ? used[id] : Used{};
    v1::CenterUtilisation c;
    c.set_ai_center_id(id);
    c.set_month(month);
    *c.add_resources() = Resource("cpu", o.cpu_hours, u.cpu_hours);
    c.mutable_resources(0)->set_measured_hours(u.measured_cpu_hours);
    *c.add_resources() = Resource("gpu", o.gpu_hours, u.gpu_hours);
    c.set_revenue(u.revenue);
    c.set_records(u.records);
    c.set_partial(partial);
    out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<v1::GetUtilisationResponse> Utilisation::Report(
    const v1::GetUtilisationRequest& request, const std::optional<std::vector<std::string>>& centers) {
  absl::CivilMonth month = absl::ToCivilMonth(clock_->Now(), absl::UTCTimeZone());
  if (!request.month().empty()) {
    JC_ASSIGN_OR_RETURN(month, ParseMonthText(request.month()));
  }
  const int trend = request.has_trend_months() ? request.trend_months() : kDefaultTrendMonths;
  if (trend < 0 || trend > kMaxTrendMonths) {
    return absl::InvalidArgumentError(absl::StrCat("trend_months: 0 to ", kMaxTrendMonths, ", got ", trend));
  }
  if (absl::FromCivil(month, absl::UTCTimeZone()) > clock_->Now()) {
    return absl::InvalidArgumentError(
        absl::StrCat("month: ", absl::FormatCivilTime(month), " has not begun: nothing was offered or used yet"));
  }
  auto shown = [&](const v1::CenterUtilisation& c) {
    if (!request.ai_center_id().empty() && c.ai_center_id() != request.ai_center_id()) return false;
    return !centers.has_value() || std::find(centers->begin(), centers->end(), c.ai_center_id()) != centers->end();
  };
  v1::GetUtilisationResponse out;
  out.set_month(absl::FormatCivilTime(month));
  JC_ASSIGN_OR_RETURN(auto cpus_of_spec, SpecCpus());  // once for every month asked
  for (int k = trend; k >= 0; --k) {
    if ((month - k).year() < 1970) continue;  // nothing was recorded before
    JC_ASSIGN_OR_RETURN(std::vector<v1::CenterUtilisation> rows, Month(absl::FormatCivilTime(month - k), cpus_of_spec));
    for (auto& c : rows) {
      if (!shown(c)) continue;
      *(k == 0 ? out.add_centers() : out.add_trend()) = std::move(c);
    }
  }
  return out;
}

}  // namespace jc::accounting
