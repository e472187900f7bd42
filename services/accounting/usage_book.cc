#include "services/accounting/usage_book.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/store/doc_table.h"
#include "common/timestamp.h"

namespace jc::accounting {
namespace {

int64_t Millis(const google::protobuf::Timestamp& t) { return absl::ToUnixMillis(FromTimestamp(t)); }

// One rollup row's sums.
struct Sums {
  int64_t records = 0;
  double wall = 0, cpu = 0, gpu = 0, energy = 0, cost = 0;
  int64_t read = 0, write = 0, memory = 0;
};

void Add(Sums* s, const v1::UsageRecord& r) {
  ++s->records;
  s->wall += r.wall_seconds();
  s->cpu += r.cpu_seconds();
  s->gpu += r.gpu_seconds();
  s->energy += r.energy_kwh();
  s->cost += r.cost();
  s->read += r.read_bytes();
  s->write += r.write_bytes();
  s->memory = std::max(s->memory, r.memory_peak_mb());
}

// Rollup row keys and how a report names them.
struct Dimension {
  const char* name;    // in group_by
  const char* column;  // in usage_daily and usage_records
};
constexpr Dimension kDimensions[] = {
    {"project", "project"}, {"user", "user_name"}, {"center", "center_id"}, {"spec", "spec_id"}};

bool IsMidnight(absl::Time t) {
  absl::CivilSecond c = absl::ToCivilSecond(t, absl::UTCTimeZone());
  return c.hour() == 0 && c.minute() == 0 && c.second() == 0 && t == absl::FromCivil(c, absl::UTCTimeZone());
}

std::string DayString(absl::Time t) { return absl::FormatTime("%Y-%m-%d", t, absl::UTCTimeZone()); }

double ToDouble(const std::optional<std::string>& v) {
  double d = 0;
  if (v) (void)absl::SimpleAtod(*v, &d);
  return d;
}
int64_t ToInt(const std::optional<std::string>& v) {
  if (!v) return 0;
  int64_t i = 0;
  if (absl::SimpleAtoi(*v, &i)) return i;
  return static_cast<int64_t>(ToDouble(v));  // PostgreSQL may print a SUM of BIGINT as numeric
}


// Adds `rows` (key values -> sums) to a sums table: one multi-row upsert per chunk (the
// keys are distinct, as the caller summed them first), so a burst costs a round trip or
// two however many groups it touched.
absl::Status UpsertSums(store::Transaction& txn, const std::string& table, const std::vector<std::string>& keys,
                        const std::map<std::vector<std::string>, Sums>& rows) {
  static const char* kSums[] = {"records",     "wall_seconds", "cpu_seconds", "gpu_seconds",       "read_bytes",
                                "write_bytes", "energy_kwh",   "cost",        "max_memory_peak_mb"};
  const size_t columns = keys.size() + 9;
  const size_t per_statement = 60000 / columns;  // under PostgreSQL's 65,535 parameters
  std::string head = absl::StrCat("INSERT INTO ", table, " (", absl::StrJoin(keys, ", "));
  for (const char* c : kSums) absl::StrAppend(&head, ", ", c);
  head += ") VALUES ";
  std::string tail = absl::StrCat(" ON CONFLICT (", absl::StrJoin(keys, ", "), ") DO UPDATE SET ");
  for (size_t i = 0; i + 1 < 9; ++i) {
    absl::StrAppend(&tail, i ? ", " : "", kSums[i], " = ", table, ".", kSums[i], " + excluded.", kSums[i]);
  }
  absl::StrAppend(&tail, ", max_memory_peak_mb = CASE WHEN excluded.max_memory_peak_mb > ", table,
                  ".max_memory_peak_mb THEN excluded.max_memory_peak_mb ELSE ", table, ".max_memory_peak_mb END");
  auto it = rows.begin();
  while (it != rows.end()) {
    store::Params params;
    size_t n = 0;
    for (; it != rows.end() && n < per_statement; ++it, ++n) {
      const auto& [key, s] = *it;
      for (const auto& k : key) params.push_back(k);
      params.insert(params.end(), {s.records, s.wall, s.cpu, s.gpu, s.read, s.write, s.energy, s.cost, s.memory});
    }
    JC_RETURN_IF_ERROR(txn.Exec(absl::StrCat(head, store::ValuesList(n, columns), tail), params).status());
  }
  return absl::OkStatus();
}

}  // namespace

void AddTotals(v1::UsageTotals* into, const v1::UsageTotals& t) {
  into->set_records(into->records() + t.records());
  into->set_wall_seconds(into->wall_seconds() + t.wall_seconds());
  into->set_cpu_seconds(into->cpu_seconds() + t.cpu_seconds());
  into->set_gpu_seconds(into->gpu_seconds() + t.gpu_seconds());
  into->set_read_bytes(into->read_bytes() + t.read_bytes());
  into->set_write_bytes(into->write_bytes() + t.write_bytes());
  into->set_energy_kwh(into->energy_kwh() + t.energy_kwh());
  into->set_cost(into->cost() + t.cost());
  into->set_max_memory_peak_mb(std::max(into->max_memory_peak_mb(), t.max_memory_peak_mb()));
}

absl::StatusOr<std::string> NextMonth(const std::string& month) {
  absl::CivilMonth m;
  if (!absl::ParseCivilTime(month, &m)) return absl::DataLossError(absl::StrCat("\"", month, "\" is not a month"));
  return absl::FormatCivilTime(m + 1);
}

std::string DayOf(const v1::UsageRecord& record) { return DayString(FromTimestamp(record.ended_at())); }

absl::Status AppendUsage(store::Transaction& txn, const std::vector<v1::UsageRecord>& given) {
  if (given.empty()) return absl::OkStatus();
  // A record's id is its attempt's (job/task/replica/attempt, "/c1" for the correction):
  // one that is stored already is that attempt's record, and appending it again changes
  // nothing — not its row, not the sums. A job manager that meters an attempt again after
  // a crash or a write whose outcome it never learnt (its record committed, its job's
  // document not) then converges instead of failing every write that carries it.
  std::vector<v1::UsageRecord> input;
  {
    constexpr size_t kIdsPerQuery = 1000;
    std::set<std::string> known;
    for (size_t first = 0; first < given.size(); first += kIdsPerQuery) {
      std::string ids = "SELECT id FROM usage_records WHERE id IN (";
      store::Params params;
      for (size_t i = first; i < std::min(given.size(), first + kIdsPerQuery); ++i) {
        absl::StrAppend(&ids, i == first ? "$" : ", $", i - first + 1);
        params.push_back(given[i].record_id());
      }
      absl::StrAppend(&ids, ")");
      JC_ASSIGN_OR_RETURN(store::Rows stored, txn.Query(ids, params));
      for (const auto& row : stored) {
        if (row[0]) known.insert(*row[0]);
      }
    }
    std::set<std::string> seen;
    for (const auto& r : given) {
      if (known.count(r.record_id()) || !seen.insert(r.record_id()).second) {
        spdlog::warn("accounting: usage record {} is stored already; the stored one stands", r.record_id());
        continue;
      }
      input.push_back(r);
    }
  }
  if (input.empty()) return absl::OkStatus();
  // Takes the accounting row first (a close updates it too, so the two take turns) and
  // learns the last month closed: a record of a closed month is billed in the first open.
  JC_ASSIGN_OR_RETURN(store::Rows state,
                      txn.Query("UPDATE accounting_state SET records = records + $1 WHERE name = 'federation' "
                                "RETURNING closed_through",
                                {static_cast<int64_t>(input.size())}));
  if (state.empty() || !state[0][0]) return absl::DataLossError("accounting_state has no federation row");
  const std::string closed = *state[0][0];
  std::vector<v1::UsageRecord> records = input;
  if (!closed.empty()) {
    JC_ASSIGN_OR_RETURN(std::string first_open, NextMonth(closed));
    for (auto& r : records) {
      if (r.billing_month() <= closed) r.set_billing_month(first_open);
    }
  }
  // Sums per daily rollup row and per billing row, keyed by their key columns' values.
  std::map<std::vector<std::string>, Sums> daily, monthly, billed;
  for (const auto& r : records) {
    JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(r));
    std::string day = DayOf(r);
    JC_RETURN_IF_ERROR(txn.InsertRow(
        "INSERT INTO usage_records (id, job_id, project, user_name, center_id, spec_id, ended_at, day, "
        "billing_month, doc)",
        {r.record_id(), r.job_id(), r.project(), r.user_name(), r.ai_center_id(), r.resource_spec_id(),
         Millis(r.ended_at()), day, r.billing_month(), std::move(doc)}));
    for (Sums* s : {&daily[{day, r.project(), r.user_name(), r.ai_center_id(), r.resource_spec_id()}],
                    &monthly[{day.substr(0, 7), r.project(), r.user_name(), r.ai_center_id(), r.resource_spec_id()}]}) {
      Add(s, r);
    }
    Add(&billed[{r.billing_month(), r.ai_center_id(), r.project()}], r);
  }
  JC_RETURN_IF_ERROR(UpsertSums(txn, "usage_daily", {"day", "project", "user_name", "center_id", "spec_id"}, daily));
  JC_RETURN_IF_ERROR(
      UpsertSums(txn, "usage_monthly", {"month", "project", "user_name", "center_id", "spec_id"}, monthly));
  JC_RETURN_IF_ERROR(UpsertSums(txn, "usage_billing", {"billing_month", "center_id", "project"}, billed));
  return absl::OkStatus();
}

absl::Status ValidateReportRequest(const v1::GetUsageReportRequest& req) {
  if (!req.has_from() || !req.has_to()) {
    return absl::InvalidArgumentError("from and to are required: the report covers attempts that ended in [from, to)");
  }
  if (FromTimestamp(req.to()) <= FromTimestamp(req.from())) {
    return absl::InvalidArgumentError(absl::StrCat("the period ends (to ", absl::FormatTime(FromTimestamp(req.to())),
                                                   ") before it starts (from ",
                                                   absl::FormatTime(FromTimestamp(req.from())), ")"));
  }
  for (const auto& g : req.group_by()) {
    bool known = std::any_of(std::begin(kDimensions), std::end(kDimensions),
                             [&](const Dimension& d) { return g == d.name; });
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("group_by: unknown grouping \"", g, "\" (one of project, user, center, spec)"));
    }
  }
  if (req.granularity() != "" && req.granularity() != "day" && req.granularity() != "month") {
    return absl::InvalidArgumentError(
        absl::StrCat("granularity: \"", req.granularity(), "\" is not one of day, month (or empty: the whole period)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ListUsageRecordsResponse> UsageBook::List(const v1::ListUsageRecordsRequest& req,
                                                             const std::optional<std::vector<std::string>>& visible) {
  std::vector<store::Condition> where;
  if (visible.has_value()) {
    if (visible->empty()) return v1::ListUsageRecordsResponse();
    where.push_back(store::InList("project", *visible));
  }
  if (!req.project().empty()) where.push_back({"project = $?", req.project()});
  if (!req.user_name().empty()) where.push_back({"user_name = $?", req.user_name()});
  if (!req.ai_center_id().empty()) where.push_back({"center_id = $?", req.ai_center_id()});
  if (!req.job_id().empty()) where.push_back({"job_id = $?", req.job_id()});
  if (req.has_from()) where.push_back({"ended_at >= $?", Millis(req.from())});
  if (req.has_to()) where.push_back({"ended_at < $?", Millis(req.to())});
  if (req.has_from() && req.has_to() && FromTimestamp(req.to()) <= FromTimestamp(req.from())) {
    return absl::InvalidArgumentError("the period ends (to) before it starts (from)");
  }
  JC_ASSIGN_OR_RETURN(store::DocPage page,
                      store::ListDocs(*store_, "usage_records", where, req.page_token(), req.page_size()));
  v1::ListUsageRecordsResponse out;
  for (const auto& doc : page.docs) {
    JC_ASSIGN_OR_RETURN(*out.add_records(), store::DecodeDoc<v1::UsageRecord>(doc));
  }
  out.set_next_page_token(page.next_page_token);
  return out;
}

absl::StatusOr<std::map<std::string, double>> UsageBook::SpentByProject(absl::CivilDay from, absl::CivilDay to) {
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      store_->Query("SELECT project, SUM(cost) FROM usage_daily WHERE day >= $1 AND day < $2 "
                                    "GROUP BY project",
                                    {absl::FormatCivilTime(from), absl::FormatCivilTime(to)}));
  std::map<std::string, double> spent;
  for (const auto& row : rows) {
    double cost = 0;
    if (row[0] && row[1] && absl::SimpleAtod(*row[1], &cost)) spent[*row[0]] = cost;
  }
  return spent;
}

absl::StatusOr<v1::GetUsageReportResponse> UsageBook::Report(const v1::GetUsageReportRequest& req,
                                                             const std::optional<std::vector<std::string>>& visible) {
  JC_RETURN_IF_ERROR(ValidateReportRequest(req));
  v1::GetUsageReportResponse out;
  if (visible.has_value() && visible->empty()) return out;
  absl::Time from = FromTimestamp(req.from()), to = FromTimestamp(req.to());
  // Whole months (and rows not per day): the monthly rollup answers; whole days: the
  // daily one. Otherwise the records themselves, summed.
  const bool whole_days = IsMidnight(from) && IsMidnight(to);
  const bool whole_months = whole_days && req.granularity() != "day" &&
                            absl::ToCivilDay(from, absl::UTCTimeZone()).day() == 1 &&
                            absl::ToCivilDay(to, absl::UTCTimeZone()).day() == 1;
  const std::string rollup = whole_months ? "usage_monthly" : "usage_daily";
  std::string sums;
  if (whole_days) {
    sums = "SUM(records), SUM(wall_seconds), SUM(cpu_seconds), SUM(gpu_seconds), SUM(read_bytes), "
           "SUM(write_bytes), SUM(energy_kwh), SUM(cost), MAX(max_memory_peak_mb)";
  }
  store::Params params;
  auto param = [&params](store::SqlValue v) {
    params.push_back(std::move(v));
    return absl::StrCat("$", params.size());
  };
  std::vector<std::string> where;
  if (whole_months) {
    where.push_back(absl::StrCat("month >= ", param(DayString(from).substr(0, 7))));
    where.push_back(absl::StrCat("month < ", param(DayString(to).substr(0, 7))));
  } else if (whole_days) {
    where.push_back(absl::StrCat("day >= ", param(DayString(from))));
    where.push_back(absl::StrCat("day < ", param(DayString(to))));
  } else {
    where.push_back(absl::StrCat("ended_at >= ", param(absl::ToUnixMillis(from))));
    where.push_back(absl::StrCat("ended_at < ", param(absl::ToUnixMillis(to))));
  }
  if (!req.project().empty()) where.push_back(absl::StrCat("project = ", param(req.project())));
  if (!req.ai_center_id().empty()) where.push_back(absl::StrCat("center_id = ", param(req.ai_center_id())));
  if (!req.user_name().empty()) where.push_back(absl::StrCat("user_name = ", param(req.user_name())));
  if (visible.has_value()) {
    std::vector<std::string> in;
    for (const auto& p : *visible) in.push_back(param(p));
    where.push_back(absl::StrCat("project IN (", absl::StrJoin(in, ", "), ")"));
  }
  std::vector<std::string> keys;
  std::string period = req.granularity() == "day"     ? "day"
                       : req.granularity() == "month" ? (whole_months ? "month" : "substr(day, 1, 7)")
                                                      : "CAST('' AS TEXT)";
  keys.push_back(period);
  std::vector<const Dimension*> grouped;
  for (const auto& d : kDimensions) {
    if (std::find(req.group_by().begin(), req.group_by().end(), d.name) != req.group_by().end()) {
      grouped.push_back(&d);
      keys.push_back(d.column);
    }
  }
  std::string select = absl::StrJoin(keys, ", ");
  // What rows are per: the period when there is one, and the groupings (PostgreSQL takes
  // no constant there).
  std::vector<std::string> by(keys.begin() + (req.granularity().empty() ? 1 : 0), keys.end());
  std::string group = by.empty() ? "" : absl::StrCat(" GROUP BY ", absl::StrJoin(by, ", "), " ORDER BY ",
                                                     absl::StrJoin(by, ", "));
  std::string sql;
  if (whole_days) {
    sql = absl::StrCat("SELECT ", select, ", ", sums, " FROM ", rollup, " WHERE ", absl::StrJoin(where, " AND "), group);
  } else {
    // The figures live in each record's document; the rows of the period are read and
    // summed here (a partial day is small next to what the rollup serves).
    sql = absl::StrCat("SELECT ", select, ", doc FROM usage_records WHERE ", absl::StrJoin(where, " AND "));
  }
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query(sql, params));
  auto fill_keys = [&](v1::UsageReportRow* row, const store::Row& r) {
    row->set_period(r[0].value_or(""));
    for (size_t i = 0; i < grouped.size(); ++i) {
      const std::string v = r[i + 1].value_or("");
      std::string name = grouped[i]->name;
      if (name == "project") row->set_project(v);
      if (name == "user") row->set_user_name(v);
      if (name == "center") row->set_ai_center_id(v);
      if (name == "spec") row->set_resource_spec_id(v);
    }
    if (!req.project().empty()) row->set_project(req.project());
    if (!req.ai_center_id().empty()) row->set_ai_center_id(req.ai_center_id());
    if (!req.user_name().empty()) row->set_user_name(req.user_name());
  };
  const size_t k = keys.size();
  if (whole_days) {
    for (const auto& r : rows) {
      if (ToInt(r[k]) == 0) continue;  // the one row of an aggregate over nothing
      auto* row = out.add_rows();
      fill_keys(row, r);
      auto* t = row->mutable_totals();
      t->set_records(ToInt(r[k]));
      t->set_wall_seconds(ToDouble(r[k + 1]));
      t->set_cpu_seconds(ToDouble(r[k + 2]));
      t->set_gpu_seconds(ToDouble(r[k + 3]));
      t->set_read_bytes(ToInt(r[k + 4]));
      t->set_write_bytes(ToInt(r[k + 5]));
      t->set_energy_kwh(ToDouble(r[k + 6]));
      t->set_cost(ToDouble(r[k + 7]));
      t->set_max_memory_peak_mb(ToInt(r[k + 8]));
      AddTotals(out.mutable_total(), *t);
    }
    return out;
  }
  std::map<std::vector<std::string>, v1::UsageReportRow> groups;
  for (const auto& r : rows) {
    std::vector<std::string> key;
    for (size_t i = 0; i < k; ++i) key.push_back(r[i].value_or(""));
    auto [it, added] = groups.try_emplace(key);
    if (added) fill_keys(&it->second, r);
    JC_ASSIGN_OR_RETURN(v1::UsageRecord rec, store::DecodeDoc<v1::UsageRecord>(r[k]));
    v1::UsageTotals t;
    t.set_records(1);
    t.set_wall_seconds(rec.wall_seconds());
    t.set_cpu_seconds(rec.cpu_seconds());
    t.set_gpu_seconds(rec.gpu_seconds());
    t.set_read_bytes(rec.read_bytes());
    t.set_write_bytes(rec.write_bytes());
    t.set_energy_kwh(rec.energy_kwh());
    t.set_cost(rec.cost());
    t.set_max_memory_peak_mb(rec.memory_peak_mb());
    AddTotals(it->second.mutable_totals(), t);
    AddTotals(out.mutable_total(), t);
  }
  for (auto& [key, row] : groups) *out.add_rows() = std::move(row);
  return out;
}

}  // namespace jc::accounting
