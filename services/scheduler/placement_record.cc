#include "services/scheduler/placement_record.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "services/scheduler/filters.h"

namespace jc::scheduler {

namespace pb = ::jointcloud::v1;

void ToProto(const ReplicaRecord& record, const ScorerRegistry& scorers, pb::ReplicaPlacement* out) {
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
  out->mutable_centers()->Reserve(static_cast<int>(centers.size()));
  size_t next = 0;  // of record.rows
  for (size_t i = 0; i < centers.size(); ++i) {
    pb::CenterEvaluation* e = out->add_centers();
    e->set_center_id(centers[i].id);
    if (next == record.rows.size() || record.rows[next].center != static_cast<int>(i)) {
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
    const CenterRow& row = record.rows[next++];
    if (row.filtered_by != nullptr) {
      e->set_filtered_by(row.filtered_by);
      e->set_reason(row.sentence == Sentence::kOwn ? row.reason : SentenceText(row.sentence, record.spec_id));
      continue;
    }
    e->set_feasible(true);
    auto* scores = e->mutable_scores();
    auto* weights = e->mutable_weights();
    for (size_t s = 0; s < scorer_ids.size(); ++s) {
      (*scores)[scorer_ids[s]] = record.scores[row.scores_row * m + s];
      (*weights)[scorer_ids[s]] = record.weights[s];
    }
    e->set_total(row.total);
    e->set_reason(row.reason);
    e->set_expected_start_seconds(row.expected_start_seconds);
    e->set_expected_finish_seconds(row.expected_finish_seconds);
    e->set_expected_cost(row.expected_cost);
  }
  if (record.chosen >= 0) out->set_center_id(centers[record.chosen].id);
  MarkTradeOff(out, record.picked >= 0 ? centers[record.picked].id : std::string());
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

void MarkTradeOff(pb::ReplicaPlacement* explain, const std::string& chosen) {
  std::vector<pb::CenterEvaluation*> feasible;
  for (auto& e : *explain->mutable_centers()) {
    if (e.feasible()) feasible.push_back(&e);
  }
  if (feasible.empty()) return;
  auto finish = [](const pb::CenterEvaluation* e) { return e->expected_finish_seconds(); };
  auto cost = [](const pb::CenterEvaluation* e) { return e->expected_cost(); };
  const double soonest = finish(*std::min_element(feasible.begin(), feasible.end(),
                                                  [&](auto* a, auto* b) { return finish(a) < finish(b); }));
  const double cheapest = cost(*std::min_element(feasible.begin(), feasible.end(),
                                                 [&](auto* a, auto* b) { return cost(a) < cost(b); }));
  // On the front: no other center is at least as soon and as cheap, and better in one.
  // Swept in order of finish, then cost (n log n: a quadratic check took 1 ms at 1,000
  // feasible centers): a center is dominated by a sooner one no dearer, or by one as soon
  // and cheaper. A cost that is not a number neither dominates nor is dominated.
  std::vector<pb::CenterEvaluation*> order;
  order.reserve(feasible.size());
  for (pb::CenterEvaluation* e : feasible) {
    if (!std::isnan(cost(e)) && !std::isnan(finish(e))) order.push_back(e);
  }
  std::sort(order.begin(), order.end(), [&](auto* a, auto* b) {
    return finish(a) != finish(b) ? finish(a) < finish(b) : cost(a) < cost(b);
  });
  absl::flat_hash_set<const pb::CenterEvaluation*> dominated;
  // The cheapest of the sooner groups; none before the first group (an infinite cost
  // there is on the front: nothing is sooner).
  bool any_sooner = false;
  double cheapest_sooner = 0;
  for (size_t g = 0; g < order.size();) {
    size_t end = g;
    while (end < order.size() && finish(order[end]) == finish(order[g])) ++end;
    const double group_cheapest = cost(order[g]);
    for (size_t k = g; k < end; ++k) {
      if ((any_sooner && cheapest_sooner <= cost(order[k])) || group_cheapest < cost(order[k])) {
        dominated.insert(order[k]);
      }
    }
    cheapest_sooner = any_sooner ? std::min(cheapest_sooner, group_cheapest) : group_cheapest;
    any_sooner = true;
    g = end;
  }
  for (pb::CenterEvaluation* e : feasible) {
    if (finish(e) == soonest) e->add_marks("fastest");
    if (cost(e) == cheapest) e->add_marks("cheapest");
    if (!dominated.contains(e)) e->add_marks("pareto");
    if (e->center_id() == chosen) e->add_marks("chosen");
  }
}

}  // namespace jc::scheduler
