#include "services/accounting/settlement.h"

#include <openssl/sha.h>

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/store/doc.h"
#include "common/timestamp.h"
#include "services/accounting/period.h"
#include "services/accounting/usage_book.h"

namespace jc::accounting {
namespace {

double D(const std::optional<std::string>& v) {
  double d = 0;
  if (v) (void)absl::SimpleAtod(*v, &d);
  return d;
}
int64_t I(const std::optional<std::string>& v) { return static_cast<int64_t>(D(v)); }


// The lines of billing months (after, through], read in `txn` (or the store).
template <typename Reader>
absl::StatusOr<std::vector<v1::SettlementLine>> Lines(Reader& reader, const std::string& after,
                                                      const std::string& through) {
  JC_ASSIGN_OR_RETURN(
      store::Rows rows,
      reader.Query("SELECT center_id, project, SUM(records), SUM(wall_seconds), SUM(cpu_seconds), SUM(gpu_seconds), "
                   "SUM(read_bytes), SUM(write_bytes), SUM(energy_kwh), SUM(cost), MAX(max_memory_peak_mb) "
                   "FROM usage_billing WHERE billing_month > $1 AND billing_month <= $2 "
                   "GROUP BY center_id, project ORDER BY center_id, project",
                   {after, through}));
  std::vector<v1::SettlementLine> lines;
  for (const auto& r : rows) {
    v1::SettlementLine line;
    line.set_ai_center_id(r[0].value_or(""));
    line.set_project(r[1].value_or(""));
    auto* t = line.mutable_totals();
    t->set_records(I(r[2]));
    t->set_wall_seconds(D(r[3]));
    t->set_cpu_seconds(D(r[4]));
    t->set_gpu_seconds(D(r[5]));
    t->set_read_bytes(I(r[6]));
    t->set_write_bytes(I(r[7]));
    t->set_energy_kwh(D(r[8]));
    t->set_cost(D(r[9]));
    t->set_max_memory_peak_mb(I(r[10]));
    lines.push_back(std::move(line));
  }
  return lines;
}

absl::Status CheckMonth(const std::string& month) {
  auto parsed = ParseMonth(month);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("month: ", parsed.status().message()));
  return absl::OkStatus();
}

}  // namespace

void FillTotals(v1::SettlementStatement* s) {
  s->clear_center_totals();
  s->clear_total();
  std::map<std::string, v1::UsageTotals> per_center;
  for (const auto& line : s->lines()) {
    AddTotals(&per_center[line.ai_center_id()], line.totals());
    AddTotals(s->mutable_total(), line.totals());
  }
  for (auto& [center, totals] : per_center) {
    auto* c = s->add_center_totals();
    c->set_ai_center_id(center);
    *c->mutable_totals() = std::move(totals);
  }
}

std::string StatementDigest(const v1::SettlementStatement& s) {
  // A text of fixed form per line (not the protobuf encoding, which need not be stable).
  std::string text = absl::StrCat(s.first_month(), "..", s.month(), "\n");
  for (const auto& l : s.lines()) {
    const auto& t = l.totals();
    absl::StrAppend(&text, absl::StrFormat("%s|%s|%d|%.6f|%.6f|%.6f|%.6f|%.9f\n", l.ai_center_id(), l.project(),
                                           t.records(), t.wall_seconds(), t.cpu_seconds(), t.gpu_seconds(),
                                           t.energy_kwh(), t.cost()));
  }
  unsigned char hash[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), hash);
  std::string hex;
  for (unsigned char b : hash) absl::StrAppend(&hex, absl::StrFormat("%02x", b));
  return hex;
}

absl::StatusOr<v1::SettlementStatement> Settlements::Get(const std::string& month, const std::string& center,
                                                         const Viewer& viewer) {
  JC_RETURN_IF_ERROR(CheckMonth(month));
  v1::SettlementStatement s;
  JC_ASSIGN_OR_RETURN(store::Rows closed, store_->Query("SELECT doc FROM settlements WHERE month = $1", {month}));
  if (!closed.empty()) {
    JC_ASSIGN_OR_RETURN(s, store::DecodeDoc<v1::SettlementStatement>(closed[0][0]));
  } else {
    JC_ASSIGN_OR_RETURN(store::Rows state,
                        store_->Query("SELECT closed_through FROM accounting_state WHERE name = 'federation'"));
    std::string through = state.empty() ? "" : state[0][0].value_or("");
    if (!through.empty() && month <= through) {
      return absl::NotFoundError(absl::StrCat("month ", month, " was settled in the statement of a later month (",
                                              "months are closed through ", through, "); see jcctl settlement list"));
    }
    s.set_month(month);
    std::string first = "";
    if (!through.empty()) {
      JC_ASSIGN_OR_RETURN(first, NextMonth(through));
    }
    s.set_first_month(first.empty() ? month : first);
    s.set_status("open");
    JC_ASSIGN_OR_RETURN(auto lines, Lines(*store_, through, month));
    for (auto& l : lines) *s.add_lines() = std::move(l);
    FillTotals(&s);
  }
  // What the caller may see of it.
  if (!center.empty() || !viewer.all) {
    auto has = [](const std::vector<std::string>& list, const std::string& v) {
      return std::find(list.begin(), list.end(), v) != list.end();
    };
    std::vector<v1::SettlementLine> kept;
    for (const auto& l : s.lines()) {
      if (!center.empty() && l.ai_center_id() != center) continue;
      if (!viewer.all && !has(viewer.projects, l.project()) && !has(viewer.centers, l.ai_center_id())) continue;
      kept.push_back(l);
    }
    s.clear_lines();
    for (auto& l : kept) *s.add_lines() = std::move(l);
    FillTotals(&s);  // of what is shown; the digest stays the whole statement's
  }
  return s;
}

absl::StatusOr<v1::SettlementStatement> Settlements::Close(const std::string& month, const std::string& closed_by) {
  JC_RETURN_IF_ERROR(CheckMonth(month));
  JC_ASSIGN_OR_RETURN(auto period, ParseMonth(month));
  absl::Time now = clock_->Now();
  if (period.second > now) {
    return absl::InvalidArgumentError(absl::StrCat("month ", month, " has not ended (it ends ",
                                                   absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", period.second,
                                                                    absl::UTCTimeZone()),
                                                   "): a month is closed after it ends"));
  }
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  // The accounting row, locked: appends of usage records wait for this close to commit.
  JC_ASSIGN_OR_RETURN(store::Rows state,
                      txn->Query(absl::StrCat("SELECT closed_through FROM accounting_state WHERE name = 'federation'",
                                              store_->for_update())));
  if (state.empty()) return absl::DataLossError("accounting_state has no federation row");
  const std::string through = state[0][0].value_or("");
  if (!through.empty() && month <= through) {
    return absl::FailedPreconditionError(
        absl::StrCat("month ", month, " is already closed (months are closed through ", through, ")"));
  }
  v1::SettlementStatement s;
  s.set_month(month);
  std::string first = month;
  if (!through.empty()) {
    JC_ASSIGN_OR_RETURN(first, NextMonth(through));
  }
  s.set_first_month(std::min(first, month));
  s.set_status("closed");
  JC_ASSIGN_OR_RETURN(auto lines, Lines(*txn, through, month));
  for (auto& l : lines) *s.add_lines() = std::move(l);
  FillTotals(&s);
  *s.mutable_closed_at() = ToTimestamp(now);
  s.set_closed_by(closed_by);
  s.set_digest(StatementDigest(s));
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(s));
  JC_RETURN_IF_ERROR(
      txn->Exec("UPDATE accounting_state SET closed_through = $1 WHERE name = 'federation'", {month}).status());
  JC_RETURN_IF_ERROR(txn->Exec("INSERT INTO settlements (month, closed_at, doc) VALUES ($1, $2, $3)",
                               {month, absl::ToUnixMillis(now), doc})
                         .status());
  JC_RETURN_IF_ERROR(txn->Commit());
  return s;
}

absl::StatusOr<std::vector<v1::SettlementStatement>> Settlements::ListClosed() {
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT doc FROM settlements ORDER BY month"));
  std::vector<v1::SettlementStatement> out;
  for (const auto& row : rows) {
    JC_ASSIGN_OR_RETURN(v1::SettlementStatement s, store::DecodeDoc<v1::SettlementStatement>(row[0]));
    s.clear_lines();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace jc::accounting
