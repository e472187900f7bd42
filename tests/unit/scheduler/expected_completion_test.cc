// Placement by expected completion (SPEC A16, issue 45 item 3): the expected_completion
// strategy weighs "wait for the faster center" against "start now on the slower one".

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "services/scheduler/placer.h"
#include "services/scheduler/scoring/builtin_scorers.h"
#include "services/scheduler/scoring/expected_completion.h"
#include "tests/unit/scheduler/scheduler_fixture.h"

namespace jc::scheduler {
namespace {

using testing::MakeCenter;
using testing::MakeRequest;

// A center four times faster than the reference, every GPU taken, `waiting` replicas queued.
CenterView BusyFastCenter(const std::string& id, int waiting) {
  CenterView c = MakeCenter(id);
  c.performance_factor = 4;
  c.free.gpu = 0;
  c.running_tasks = 8;
  c.waiting_tasks = waiting;
  return c;
}

// Idle, at the reference speed.
CenterView IdleSlowCenter(const std::string& id) { return MakeCenter(id); }

struct Decided {
  std::string center;
  bool fits_now = true;
  std::vector<std::string> reasons;  // per center of the snapshot, the explanation's
};

// The placer with expected_completion alone, considering busy centers.
Decided PlaceByCompletion(const Snapshot& snap, PlacementRequest req, bool consider_busy = true) {
  ScorerRegistry registry;
  RegisterBuiltinScorers(registry);
  std::vector<double> weights(registry.size(), 0);
  weights[registry.IndexOf("expected_completion")] = 1;
  WeightedSumModel model;
  Placer placer(registry, model);
  req.consider_busy_centers = consider_busy;
  jointcloud::v1::ReplicaPlacement explain;
  ReplicaDecision d = placer.Place(req, snap, weights, &explain);
  Decided out;
  out.center = d.center < 0 ? "" : snap.centers()[d.center].id;
  out.fits_now = d.fits_now;
  for (const auto& e : explain.centers()) out.reasons.push_back(e.reason());
  return out;
}

// Raw expected finish (seconds from now) per center of `snap`.
std::vector<CompletionEstimate> Estimates(const Snapshot& snap, const PlacementRequest& req) {
  std::vector<const CenterView*> centers;
  std::vector<const SpecAtCenter*> specs;
  for (const auto& c : snap.centers()) {
    centers.push_back(&c);
    specs.push_back(&c.specs.at(req.spec_id));
  }
  std::vector<CandidateFacts> facts;
  for (const auto* c : centers) facts.push_back(FactsFor(req, *c));
  ScoringContext ctx{&req, &snap, centers, specs, {}, facts};
  std::vector<CompletionEstimate> out;
  for (size_t i = 0; i < centers.size(); ++i) out.push_back(EstimateCompletion(ctx, i));
  return out;
}

TEST_CASE("expected completion: a fast center with a short queue beats a slow idle one for a long job [A16]",
          "[A16]") {
  Snapshot snap;
  snap.Upsert(BusyFastCenter("fast", 2));
  snap.Upsert(IdleSlowCenter("slow"));
  PlacementRequest req = MakeRequest();
  req.expected_runtime = absl::Hours(10);
  auto e = Estimates(snap, req);
  // fast: an hour's typical run at 4x is 15 min, half of it ahead (2 waiting < 8 slots),
  // then 10 h / 4; slow: starts now, 10 h.
  CHECK(e[0].start_s == Approx(450));
  CHECK(e[0].finish_s == Approx(450 + 9000));  // no data to move
  CHECK(e[0].finish_s < e[1].finish_s);
  CHECK(e[1].start_s == 0);
  Decided d = PlaceByCompletion(snap, req);
  CHECK(d.center == "fast");
  CHECK_FALSE(d.fits_now);  // the caller holds it for the fast center
  // Without considering busy centers the fast one is filtered out: the job starts now.
  Decided now = PlaceByCompletion(snap, req, false);
  CHECK(now.center == "slow");
  CHECK(now.fits_now);
}

TEST_CASE("expected completion: a slow idle center wins for a short job behind a long queue [A16]", "[A16]") {
  Snapshot snap;
  snap.Upsert(BusyFastCenter("fast", 24));  // three rounds of 8 slots ahead
  snap.Upsert(IdleSlowCenter("slow"));
  PlacementRequest req = MakeRequest();
  req.expected_runtime = absl::Minutes(10);
  auto e = Estimates(snap, req);
  CHECK(e[0].start_s == Approx(3.5 * 900));
  CHECK(e[1].finish_s < e[0].finish_s);
  Decided d = PlaceByCompletion(snap, req);
  CHECK(d.center == "slow");
  CHECK(d.fits_now);
  // The same queue, a long job: waiting for the fast center pays again.
  req.expected_runtime = absl::Hours(10);
  CHECK(PlaceByCompletion(snap, req).center == "fast");
}

TEST_CASE("expected completion: the center's own start report is used when present [A16]", "[A16]") {
  Snapshot snap;
  CenterView fast = BusyFastCenter("fast", 0);  // by the queue's length it would start in 7.5 min
  PlacementRequest req = MakeRequest();
  req.expected_runtime = absl::Hours(10);
  fast.reported_start_delay["gpu-1"] = absl::Hours(20);
  fast.queue_reported_at = req.now - absl::Hours(1);  // said an hour ago: 19 h from now
  fast.reported_start_delay["other-spec"] = absl::ZeroDuration();  // another spec's says nothing of this one
  snap.Upsert(fast);
  snap.Upsert(IdleSlowCenter("slow"));
  auto e = Estimates(snap, req);
  CHECK(e[0].start_s == Approx(19 * 3600));
  CHECK(e[0].Basis() == "the center's queue report");
  Decided d = PlaceByCompletion(snap, req);
  CHECK(d.center == "slow");
  // The explanation says when it would start and finish at each center.
  REQUIRE(d.reasons.size() == 2);
  CHECK(d.reasons[0].find("expected_completion: expected start in 19.0 h (the center's queue report), finish in "
                          "21.5 h") != std::string::npos);
  CHECK(d.reasons[1].find("expected_completion: expected start now (fits the free capacity), finish in 10.0 h") !=
        std::string::npos);
  // A short report: the fast center again.
  snap.FindMutable("fast")->reported_start_delay["gpu-1"] = absl::Hours(1) + absl::Minutes(30);
  CHECK(PlaceByCompletion(snap, req).center == "fast");
}

TEST_CASE("expected completion: no snapshot field makes a job unschedulable [A16]", "[A16]") {
  // Every figure the strategy reads, missing or absurd: it still gives a finite score and
  // the placer still places the job wherever the filters let it.
  CenterView odd = MakeCenter("odd");  // its free capacity holds the spec
  odd.performance_factor = 0;
  odd.network.bandwidth_mbps = 0;
  odd.running_tasks = -3;
  odd.waiting_tasks = -1;
  odd.assumed_replicas = 1 << 30;
  odd.capacity = {};
  odd.queue_reported_at = absl::InfiniteFuture();
  odd.reported_start_delay["gpu-1"] = absl::InfiniteDuration();
  CenterView queued = MakeCenter("queued");  // busy: a candidate only when busy centers count
  queued.free.gpu = 0;
  queued.queue_reported_at = absl::InfiniteFuture();
  queued.reported_start_delay["gpu-1"] = absl::InfiniteDuration();
  CenterView guessed = MakeCenter("guessed");  // busy, no report, absurd counts
  guessed.free.gpu = 0;
  guessed.performance_factor = -2;
  guessed.waiting_tasks = 1 << 30;
  guessed.assumed_replicas = -7;
  CenterView early = MakeCenter("early");  // busy, a report from the past's past
  early.free.gpu = 0;
  early.reported_start_delay["gpu-1"] = -absl::Hours(5);
  for (bool consider_busy : {false, true}) {
    for (absl::Duration runtime : {absl::ZeroDuration(), absl::Hours(1), absl::InfiniteDuration()}) {
      INFO("consider busy " << consider_busy << " runtime " << absl::FormatDuration(runtime));
      PlacementRequest req = MakeRequest();
      req.expected_runtime = runtime;
      Snapshot snap;
      snap.Upsert(odd);
      snap.Upsert(queued);
      snap.Upsert(guessed);
      for (const auto& e : Estimates(snap, req)) {
        CHECK(std::isfinite(e.start_s));
        CHECK(e.start_s >= 0);
        CHECK(std::isfinite(e.finish_s));
      }
      Decided d = PlaceByCompletion(snap, req, consider_busy);
      CHECK(d.center == "odd");  // the one that fits now; a start that never comes is never preferred
      CHECK(d.fits_now);
      // Only busy centers: the job is held for one, never left without a center.
      Snapshot busy;
      busy.Upsert(queued);
      busy.Upsert(guessed);
      busy.Upsert(early);
      for (const auto& e : Estimates(busy, req)) CHECK(std::isfinite(e.finish_s));
      if (consider_busy) CHECK_FALSE(PlaceByCompletion(busy, req).center.empty());
    }
  }
}

TEST_CASE("expected completion is registered and the default profile leaves it out until measured [A16]",
          "[A16]") {
  ScorerRegistry registry;
  RegisterBuiltinScorers(registry);
  const Scorer* s = registry.Find("expected_completion");
  REQUIRE(s != nullptr);
  CHECK_FALSE(s->higher_is_better());
  auto weights = WeightProfiles::Builtin().Resolve("default", {}, registry);
  REQUIRE(weights.ok());
  CHECK((*weights)[registry.IndexOf("expected_completion")] == 0);
  CHECK((*weights)[registry.IndexOf("least_load")] == 1);
  auto completion = WeightProfiles::Builtin().Resolve("completion", {}, registry);
  REQUIRE(completion.ok());
  CHECK((*completion)[registry.IndexOf("expected_completion")] > 0);
  // "completion" is the default's strategies with expected completion on top: a strategy
  // that joins the default (gpu_fragmentation, session 71) joins it too.
  for (size_t i = 0; i < registry.size(); ++i) {
    if (static_cast<int>(i) == registry.IndexOf("expected_completion")) continue;
    INFO(std::string(registry.scorers()[i]->id()));
    CHECK((*completion)[i] == (*weights)[i]);
  }
  // An operator's own default (--weight_profiles) is the one "completion" builds on.
  WeightProfiles operators = WeightProfiles::Builtin();
  REQUIRE(operators.Set("default", {{"lowest_price", 3}}).ok());
  auto theirs = operators.Resolve("completion", {}, registry);
  REQUIRE(theirs.ok());
  CHECK((*theirs)[registry.IndexOf("lowest_price")] == 3);
  CHECK((*theirs)[registry.IndexOf("least_load")] == 0);
  CHECK((*theirs)[registry.IndexOf("expected_completion")] == 4);
  // A "completion" they set themselves is whole, as listed.
  REQUIRE(operators.Set("completion", {{"network", 2}}).ok());
  auto own = operators.Resolve("completion", {}, registry);
  REQUIRE(own.ok());
  CHECK((*own)[registry.IndexOf("network")] == 2);
  CHECK((*own)[registry.IndexOf("lowest_price")] == 0);
  CHECK((*own)[registry.IndexOf("expected_completion")] == 0);
}

}  // namespace
}  // namespace jc::scheduler

namespace jc::scheduler {
namespace {

TEST_CASE("the plan shows the trade-off per center: expected start, finish and cost, the fastest, the cheapest, the "
          "Pareto front and the pick [A16]",
          "[A16]") {
  // fast: busy, four times faster, dearer; slow: idle, cheap; dear: idle, slow and dearest
  // (no better in anything: off the front).
  Snapshot snap;
  CenterView fast = BusyFastCenter("fast", 2);
  fast.specs.at("gpu-1").price = 8;
  snap.Upsert(fast);
  CenterView slow = IdleSlowCenter("slow");
  slow.specs.at("gpu-1").price = 1;
  snap.Upsert(slow);
  CenterView dear = IdleSlowCenter("dear");
  dear.specs.at("gpu-1").price = 20;
  snap.Upsert(dear);
  PlacementRequest req = MakeRequest();
  req.expected_runtime = absl::Hours(10);
  req.consider_busy_centers = true;
  ScorerRegistry registry;
  RegisterBuiltinScorers(registry);
  std::vector<double> weights(registry.size(), 0);
  weights[registry.IndexOf("lowest_price")] = 1;  // the profile picks the cheapest
  WeightedSumModel model;
  Placer placer(registry, model);
  jointcloud::v1::ReplicaPlacement explain;
  ReplicaDecision d = placer.Place(req, snap, weights, &explain);
  REQUIRE(d.center >= 0);
  CHECK(snap.centers()[d.center].id == "slow");
  std::map<std::string, const jointcloud::v1::CenterEvaluation*> by;
  for (const auto& e : explain.centers()) by[e.center_id()] = &e;
  REQUIRE(by.size() == 3);
  auto marks = [&](const std::string& id) {
    std::string out;
    for (const auto& m : by[id]->marks()) out += m + " ";
    return out;
  };
  // fast: 7.5 min queue, then 10 h / 4; 2.5 h at 8 an hour.
  CHECK(by["fast"]->expected_start_seconds() == Approx(450));
  CHECK(by["fast"]->expected_finish_seconds() == Approx(450 + 9000));
  CHECK(by["fast"]->expected_cost() == Approx(20));
  CHECK(by["slow"]->expected_start_seconds() == 0);
  CHECK(by["slow"]->expected_cost() == Approx(10));
  CHECK(marks("fast") == "fastest pareto ");
  CHECK(marks("slow") == "cheapest pareto chosen ");
  CHECK(marks("dear") == "");
}

}  // namespace
}  // namespace jc::scheduler
