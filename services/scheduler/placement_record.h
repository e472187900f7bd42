#pragma once

// A decision's explanation kept as numbers (issue 48 item 2): the scheduler records one for
// every placement it makes (GetJobPlacement answers from it), and builds the protobuf only
// when someone asks. Building the protobuf for every decision cost 30 times the decision at
// 1,000 centers (a map of scores and of weights per center); these rows cost a filter
// verdict per center and a row of numbers per feasible one. ToProto gives what the placer
// explained with before, field for field.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "jointcloud/v1/scheduler.pb.h"
#include "services/scheduler/scoring/scorer_registry.h"
#include "services/scheduler/snapshot.h"

namespace jc::scheduler {

// Of a filtered center: its filter's sentence when the sentence is the same for every
// center the filter removes (ToProto writes it), else kOwn (CenterRow::reason holds it).
enum class Sentence : uint8_t { kOwn, kNotAvailable, kNotPinned, kMovingAway, kNoSpec, kRetryElsewhere, kRefusedHere };

// What the gate filters read of the request (filters.h GateFilters).
struct GateRequest {
  std::vector<std::string> pinned_centers;
  std::string excluded_center;
  int min_security_grade = 0;
  std::string project;
  std::string user;
};

struct CenterRow {
  int center = 0;                     // index into ReplicaRecord::centers
  const char* filtered_by = nullptr;  // a filter's name (filters.h); null: feasible
  Sentence sentence = Sentence::kOwn;
  std::string reason;  // a filtered center's own sentence, or a feasible one's notes
  // Feasible only: the row of ReplicaRecord::scores, the model's total, and what the
  // expected-completion arithmetic found.
  int scores_row = -1;
  double total = 0;
  double expected_start_seconds = 0, expected_finish_seconds = 0, expected_cost = 0;
};

struct ReplicaRecord {
  int task_index = 0;
  int replica_index = 0;
  std::string spec_id;  // for the spec_offered sentence
  GateRequest gate;
  // Every center of the snapshot the decision read, by index; shared between the records
  // made from one indexed snapshot.
  std::shared_ptr<const std::vector<CenterGate>> centers;
  // The centers the decision visited, in snapshot order (on an indexed snapshot, those
  // offering the spec): every other center failed a gate filter or spec_offered, which
  // ToProto says again from `centers` and `gate`.
  std::vector<CenterRow> rows;
  std::vector<double> weights;  // per scorer, registry order (as many as the registry has)
  std::vector<int> scores;      // [scores_row * weights.size() + scorer]
  int chosen = -1;              // index into centers; -1: none
  // The profile's pick, marked "chosen" among the trade-offs; a gang that does not fit
  // shows no center (chosen -1) but keeps what each replica's decision picked.
  int picked = -1;
};

struct PlacementRecord {
  std::string job_id;
  absl::Time decided_at = absl::InfinitePast();
  bool placed = false;
  std::string reason;
  std::vector<ReplicaRecord> replicas;
  std::vector<std::string> expected_durations;
};

// The protobuf explanation of `record`, scored by `scorers` (the registry the decision used).
void ToProto(const ReplicaRecord& record, const ScorerRegistry& scorers, jointcloud::v1::ReplicaPlacement* out);
// The same, of only the centers `keep` holds (by index into record.centers): the rest are
// never built (the placement journal keeps a few of a thousand), their trade-off marks
// still weighed against every feasible center.
void ToProto(const ReplicaRecord& record, const ScorerRegistry& scorers, const std::vector<bool>& keep,
             jointcloud::v1::ReplicaPlacement* out);
void ToProto(const PlacementRecord& record, const ScorerRegistry& scorers, jointcloud::v1::Placement* out);
// The same, into what `out` holds already: its replicas and expected durations added to,
// its job id kept when the record has none (Placer::PlaceJob's way).
void AppendTo(const PlacementRecord& record, const ScorerRegistry& scorers, jointcloud::v1::Placement* out);

// Marks the explained centers of one replica (SPEC A16, issue 45 item 5): the fastest, the
// cheapest, those on the Pareto front of expected finish and cost, and `chosen` (the
// profile's pick), from each feasible center's expected_finish_seconds and expected_cost.
void MarkTradeOff(jointcloud::v1::ReplicaPlacement* explain, const std::string& chosen);

// The same marks of n feasible centers from their expected finish and cost alone, in their
// order; AddMarks writes one center's (and "chosen" when it is the pick) as MarkTradeOff does.
struct TradeOff {
  bool fastest = false, cheapest = false, pareto = false;
};
std::vector<TradeOff> TradeOffs(const std::vector<double>& finish, const std::vector<double>& cost);
void AddMarks(const TradeOff& marks, bool chosen, jointcloud::v1::CenterEvaluation* e);

}  // namespace jc::scheduler
