#include "services/scheduler/placement_record.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "services/scheduler/filters.h"

namespace jc::scheduler {

namespace pb = ::jointcloud::v1;

namespace {

// The explanation of `record`'s centers for which `keep` holds (every one when null), in
// snapshot order; the trade-off marks weighed over every feasible center, kept or not.
void ReplicaToProto(const ReplicaRecord& record, const ScorerRegistry& scorers, const std::vector<bool>* keep,
                    pb::ReplicaPlacement* out) {
  out->set_task_index(record.task_index);
  out->set_replica_index(record.replica_index);
  out->clear_centers();
  const std::vector<CenterGate>& centers = *record.centers;
  const size_t m = record.weights.size();
  // The scorers' ids once, not once per center; the no-spec sentence once (most centers
  // of a real federation do not offer a given spec); one buffer for the gates' sentences.
  std::vector<std::string> scorer_ids;
  for (size_t s = 0; s < m && s < scorers.size(); ++s) scorer_ids.emplace_back(scorers.scorers()[s]->id());
  std::string no_spec;
  std::string reason;
  // Each feasible row's trade-off marks, weighed over all of them, whichever are built.
  std::vector<double> finish, cost;
  for (const CenterRow& row : record.rows) {
    if (row.filtered_by != nullptr) continue;
    finish.push_back(row.expected_finish_seconds);
    cost.push_back(row.expected_cost);
  }
  const std::vector<TradeOff> marks = TradeOffs(finish, cost);
  const std::string* picked = record.picked >= 0 ? &centers[record.picked].id : nullptr;
  out->mutable_centers()->Reserve(static_cast<int>(keep == nullptr ? centers.size() : 16));
  size_t next = 0;      // of record.rows
  size_t feasible = 0;  // feasible rows passed
  for (size_t i = 0; i < centers.size(); ++i) {
    const bool visited = next < record.rows.size() && record.rows[next].center == static_cast<int>(i);
    const CenterRow* row = visited ? &record.rows[next++] : nullptr;
    const bool scored = row != nullptr && row->filtered_by == nullptr;
    if (scored) ++feasible;
    if (keep != nullptr && !(*keep)[i]) continue;
    pb::CenterEvaluation* e = out->add_centers();
    e->set_center_id(centers[i].id);
    if (row == nullptr) {
      // Not visited: not offering the spec, or not named by a task that names centers.
      if (const char* filter = GateFilters(record.gate, centers[i], &reason); filter != nullptr) {
        e->set_filtered_by(filter);
        e->set_reason(reason);
      } else {
        if (no_spec.empty()) no_spec = NoSpecReason(record.spec_id);
        e->set_filtered_by(kFilterSpec);
        e->set_reason(no_spec);
      }
      continue;
    }
    if (!scored) {
      e->set_filtered_by(row->filtered_by);
      e->set_reason(row->sentence == Sentence::kOwn ? row->reason : SentenceText(row->sentence, record.spec_id));
      continue;
    }
    e->set_feasible(true);
    auto* scores = e->mutable_scores();
    auto* weights = e->mutable_weights();
    for (size_t s = 0; s < scorer_ids.size(); ++s) {
      (*scores)[scorer_ids[s]] = record.scores[row->scores_row * m + s];
      (*weights)[scorer_ids[s]] = record.weights[s];
    }
    e->set_total(row->total);
    e->set_reason(row->reason);
    e->set_expected_start_seconds(row->expected_start_seconds);
    e->set_expected_finish_seconds(row->expected_finish_seconds);
    e->set_expected_cost(row->expected_cost);
    AddMarks(marks[feasible - 1], picked != nullptr && *picked == centers[i].id, e);
  }
  if (record.chosen >= 0) out->set_center_id(centers[record.chosen].id);
}

}  // namespace

void ToProto(const ReplicaRecord& record, const ScorerRegistry& scorers, pb::ReplicaPlacement* out) {
  ReplicaToProto(record, scorers, nullptr, out);
}

void ToProto(const ReplicaRecord& record, const ScorerRegistry& scorers, const std::vector<bool>& keep,
             pb::ReplicaPlacement* out) {
  ReplicaToProto(record, scorers, &keep, out);
}

void AppendTo(const PlacementRecord& record, const ScorerRegistry& scorers, pb::Placement* out) {
  if (!record.job_id.empty()) out->set_job_id(record.job_id);
  for (const ReplicaRecord& r : record.replicas) ToProto(r, scorers, out->add_replicas());
  out->set_placed(record.placed);
  out->set_reason(record.reason);
  for (const std::string& d : record.expected_durations) out->add_expected_durations(d);
}

void ToProto(const PlacementRecord& record, const ScorerRegistry& scorers, pb::Placement* out) {
  out->Clear();
  AppendTo(record, scorers, out);
}

std::vector<TradeOff> TradeOffs(const std::vector<double>& finish, const std::vector<double>& cost) {
  const size_t n = finish.size();
  std::vector<TradeOff> out(n);
  if (n == 0) return out;
  const double soonest = *std::min_element(finish.begin(), finish.end());
  const double cheapest = *std::min_element(cost.begin(), cost.end());
  // On the front: no other center is at least as soon and as cheap, and better in one.
  // Swept in order of finish, then cost (n log n: a quadratic check took 1 ms at 1,000
  // feasible centers): a center is dominated by a sooner one no dearer, or by one as soon
  // and cheaper. A cost that is not a number neither dominates nor is dominated.
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    if (!std::isnan(cost[k]) && !std::isnan(finish[k])) order.push_back(k);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return finish[a] != finish[b] ? finish[a] < finish[b] : cost[a] < cost[b];
  });
  std::vector<bool> dominated(n, false);
  // The cheapest of the sooner groups; none before the first group (an infinite cost
  // there is on the front: nothing is sooner).
  bool any_sooner = false;
  double cheapest_sooner = 0;
  for (size_t g = 0; g < order.size();) {
    size_t end = g;
    while (end < order.size() && finish[order[end]] == finish[order[g]]) ++end;
    const double group_cheapest = cost[order[g]];
    for (size_t k = g; k < end; ++k) {
      if ((any_sooner && cheapest_sooner <= cost[order[k]]) || group_cheapest < cost[order[k]]) {
        dominated[order[k]] = true;
      }
    }
    cheapest_sooner = any_sooner ? std::min(cheapest_sooner, group_cheapest) : group_cheapest;
    any_sooner = true;
    g = end;
  }
  for (size_t k = 0; k < n; ++k) out[k] = {finish[k] == soonest, cost[k] == cheapest, !dominated[k]};
  return out;
}

void AddMarks(const TradeOff& marks, bool chosen, pb::CenterEvaluation* e) {
  if (marks.fastest) e->add_marks("fastest");
  if (marks.cheapest) e->add_marks("cheapest");
  if (marks.pareto) e->add_marks("pareto");
  if (chosen) e->add_marks("chosen");
}

void MarkTradeOff(pb::ReplicaPlacement* explain, const std::string& chosen) {
  std::vector<pb::CenterEvaluation*> feasible;
  std::vector<double> finish, cost;
  for (auto& e : *explain->mutable_centers()) {
    if (!e.feasible()) continue;
    feasible.push_back(&e);
    finish.push_back(e.expected_finish_seconds());
    cost.push_back(e.expected_cost());
  }
  const std::vector<TradeOff> marks = TradeOffs(finish, cost);
  for (size_t k = 0; k < feasible.size(); ++k) AddMarks(marks[k], feasible[k]->center_id() == chosen, feasible[k]);
}

}  // namespace jc::scheduler
