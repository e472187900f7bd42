#include "services/accounting/reconciliation.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/timestamp.h"

namespace jc::accounting {
namespace {

// Either side's clock may put an end a little either side of the period's bounds.
constexpr absl::Duration kMargin = absl::Hours(24);

std::string IdOf(const apb::ReplicaKey& k) {
  return absl::StrCat(k.job_id(), "/", k.task_index(), "/", k.replica_index(), "/", k.attempt());
}

bool Ran(const apb::AccountingEntry& e) {
  bool over = e.state() == apb::REPLICA_SUCCEEDED || e.state() == apb::REPLICA_FAILED ||
              e.state() == apb::REPLICA_STOPPED;
  return over && (e.has_started_at() || e.usage().wall_seconds() > 0);
}

const char* Outcome(apb::ReplicaState s) {
  switch (s) {
    case apb::REPLICA_SUCCEEDED: return "succeeded";
    case apb::REPLICA_FAILED: return "failed";
    case apb::REPLICA_STOPPED: return "stopped";
    default: return "";
  }
}

double EntryWall(const apb::AccountingEntry& e) {
  if (e.usage().wall_seconds() > 0) return e.usage().wall_seconds();
  if (e.has_started_at() && e.has_ended_at()) {
    return std::max(0.0, absl::ToDoubleSeconds(FromTimestamp(e.ended_at()) - FromTimestamp(e.started_at())));
  }
  return 0;
}

}  // namespace

v1::ReconcileResponse Compare(const std::string& center_id, const std::vector<v1::UsageRecord>& records,
                              const apb::ListAccountingResponse& center, absl::Time from, absl::Time to,
                              const std::string& origin, double tolerance_seconds, double tolerance_ratio) {
  auto inside = [&](absl::Time t) { return t >= from && t < to; };
  auto apart = [&](double a, double b) {
    return std::fabs(a - b) > std::max(tolerance_seconds, tolerance_ratio * std::max(std::fabs(a), std::fabs(b)));
  };
  v1::ReconcileResponse out;
  out.set_ai_center_id(center_id);
  out.set_center_source(center.source());
  // Each attempt's figures: its record plus any correction (which carries the difference).
  std::map<std::string, v1::UsageRecord> effective;
  for (const auto& r : records) {
    if (r.ai_center_id() != center_id) continue;
    const std::string& id = r.corrects().empty() ? r.record_id() : r.corrects();
    auto [it, first] = effective.try_emplace(id, r);
    if (first) continue;
    v1::UsageRecord& e = it->second;
    e.set_wall_seconds(e.wall_seconds() + r.wall_seconds());
    e.set_cpu_seconds(e.cpu_seconds() + r.cpu_seconds());
    e.set_outcome(r.outcome());
    e.set_record_id(id);
    if (r.has_center_claim()) *e.mutable_center_claim() = r.center_claim();
  }
  std::map<std::string, const v1::UsageRecord*> ours;
  for (const auto& [id, r] : effective) ours[id] = &r;
  std::map<std::string, const apb::AccountingEntry*> theirs;
  for (const auto& e : center.entries()) {
    if (e.key().origin() == origin) theirs[IdOf(e.key())] = &e;
  }
  auto add = [&](const std::string& kind, const std::string& id, const std::string& field, double f, double c,
                 const std::string& detail) {
    auto* d = out.add_differences();
    d->set_kind(kind);
    d->set_record_id(id);
    d->set_field(field);
    d->set_federation(f);
    d->set_center(c);
    d->set_detail(detail);
  };
  for (const auto& [id, r] : ours) {
    if (inside(FromTimestamp(r->ended_at()))) out.set_federation_records(out.federation_records() + 1);
  }
  for (const auto& [id, r] : ours) {
    if (!inside(FromTimestamp(r->ended_at()))) continue;
    auto it = theirs.find(id);
    if (it == theirs.end() || !Ran(*it->second)) {
      add("extra", id, "", r->wall_seconds(), 0,
          it == theirs.end() ? "the center's adapter has no replica of it ending in the period"
          : it->second->state() == apb::REPLICA_STATE_UNSPECIFIED ? "the center has no record of it"
                                                                  : "the center says it never ran");
      continue;
    }
    const apb::AccountingEntry& e = *it->second;
    bool same = true;
    double wall = EntryWall(e);
    if (apart(r->wall_seconds(), wall)) {
      // A record bounded by what the control plane saw says so: the center's claim was not billed.
      add("different", id, "wall_seconds", r->wall_seconds(), wall,
          r->has_center_claim() ? absl::StrCat("billed within what the control plane saw; the center claimed ",
                                               r->center_claim().bounded())
                                : "");
      same = false;
    }
    if (r->cpu_seconds() > 0 && e.usage().cpu_seconds() > 0 && apart(r->cpu_seconds(), e.usage().cpu_seconds())) {
      add("different", id, "cpu_seconds", r->cpu_seconds(), e.usage().cpu_seconds(), "");
      same = false;
    }
    if (r->outcome() != Outcome(e.state())) {
      add("different", id, "outcome", 0, 0, absl::StrCat("federation: ", r->outcome(), ", center: ", Outcome(e.state())));
      same = false;
    }
    if (same) out.set_matched(out.matched() + 1);
  }
  for (const auto& [id, e] : theirs) {
    if (!Ran(*e)) continue;
    absl::Time end = e->has_ended_at() ? FromTimestamp(e->ended_at()) : from;
    if (!inside(end)) continue;
    out.set_center_entries(out.center_entries() + 1);
    if (!ours.count(id)) add("missing", id, "", 0, EntryWall(*e), "the center ran it; the federation has no record");
  }
  return out;
}

absl::StatusOr<v1::ReconcileResponse> Reconciler::Reconcile(const v1::ReconcileRequest& req) {
  if (req.ai_center_id().empty()) return absl::InvalidArgumentError("ai_center_id: which center to reconcile");
  if (!req.has_from() || !req.has_to() || FromTimestamp(req.to()) <= FromTimestamp(req.from())) {
    return absl::InvalidArgumentError("from and to are required, and the period ends before it starts otherwise");
  }
  if (req.tolerance_seconds() < 0 || req.tolerance_ratio() < 0) {
    return absl::InvalidArgumentError("tolerances must not be negative");
  }
  absl::Time from = FromTimestamp(req.from()), to = FromTimestamp(req.to());
  JC_ASSIGN_OR_RETURN(apb::ListAccountingResponse center, fetch_(req.ai_center_id(), from - kMargin, to + kMargin));
  std::vector<v1::UsageRecord> records;
  v1::ListUsageRecordsRequest list;
  list.set_ai_center_id(req.ai_center_id());
  *list.mutable_from() = ToTimestamp(from - kMargin);
  *list.mutable_to() = ToTimestamp(to + kMargin);
  list.set_page_size(1000);
  do {
    JC_ASSIGN_OR_RETURN(auto page, book_->List(list, std::nullopt));
    records.insert(records.end(), page.records().begin(), page.records().end());
    list.set_page_token(page.next_page_token());
  } while (!list.page_token().empty());
  return Compare(req.ai_center_id(), records, center, from, to, origin_(),
                 req.tolerance_seconds() > 0 ? req.tolerance_seconds() : 5,
                 req.tolerance_ratio() > 0 ? req.tolerance_ratio() : 0.05);
}

}  // namespace jc::accounting
