// Capacity few centers offer, kept for the specs that need it before their jobs wait
// (SPEC A16, issue 45: ScarceSpecs and the placer's preference).

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "services/scheduler/filters.h"
#include "services/scheduler/placer.h"
#include "services/scheduler/scarce_specs.h"
#include "services/scheduler/scoring/builtin_scorers.h"
#include "tests/unit/scheduler/scheduler_fixture.h"

namespace jc::scheduler {
namespace {

using testing::MakeCenter;
using testing::MakeRequest;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// `n` centers offering gpu-1; "h100", the cheapest, also offers "h100-8" (8 GPUs), which
// no other center does; "pair" is offered by h100 and any-1.
Snapshot Federation(int n) {
  Snapshot snap;
  CenterView h100 = MakeCenter("h100", 1);
  h100.specs["h100-8"] = SpecAtCenter{{32, 8, 0, 0, 131072, 0}, 8, 3200};
  h100.specs["pair"] = SpecAtCenter{{4, 1, 0, 0, 16384, 0}, 1, 400};
  snap.Upsert(h100);
  for (int i = 1; i < n; ++i) {
    CenterView c = MakeCenter(absl::StrCat("any-", i), 100);
    if (i == 1) c.specs["pair"] = SpecAtCenter{{4, 1, 0, 0, 16384, 0}, 100, 400};
    snap.Upsert(c);
  }
  return snap;
}

TEST_CASE("a spec placed within a day that at most a fifth of the centers could run keeps them, and a broader, an "
          "older or an unknown spec keeps nothing, and the memory is bounded [A16]",
          "[A16]") {
  Snapshot snap = Federation(5);
  uint64_t generation = 0;  // a new snapshot each call: worked out again
  ScarceSpecs specs;
  specs.Saw("h100-8", "p", kT0);
  specs.Saw("gpu-1", "p", kT0);  // offered by all five: no replica could run at five times as many
  specs.Saw("nope", "p", kT0);   // offered nowhere
  auto kept = specs.Centers(snap, kT0 + absl::Hours(1), ++generation);
  REQUIRE(kept != nullptr);
  REQUIRE(kept->size() == 1);
  REQUIRE(kept->contains("h100"));
  CHECK(kept->at("h100").breadth == 1);
  CHECK(kept->at("h100").spec_id == "h100-8");
  // "pair" (two of five centers) is not narrow enough for five; of ten centers it is, and a
  // center offering two kept specs is kept for the narrower.
  specs.Saw("pair", "p", kT0);
  CHECK(specs.Centers(snap, kT0, ++generation)->size() == 1);
  Snapshot ten = Federation(10);
  kept = specs.Centers(ten, kT0, ++generation);
  REQUIRE(kept->size() == 2);
  CHECK(kept->at("h100").spec_id == "h100-8");
  CHECK(kept->at("any-1").spec_id == "pair");
  CHECK(kept->at("any-1").breadth == 2);
  // Asked for again, a spec stays a day from then; past a day it is forgotten.
  specs.Saw("pair", "p", kT0 + absl::Hours(20));
  kept = specs.Centers(ten, kT0 + absl::Hours(25), ++generation);
  CHECK(kept->size() == 2);  // h100 and any-1, for "pair" alone now
  CHECK(kept->at("h100").spec_id == "pair");
  CHECK(specs.size() == 1);
  CHECK(specs.Centers(ten, kT0 + absl::Hours(45), ++generation)->empty());
  CHECK(specs.size() == 0);
  // Unavailable centers count for nothing: with h100 down "h100-8" keeps nothing.
  specs.Saw("h100-8", "p", kT0);
  ten.FindMutable("h100")->available = false;
  CHECK(specs.Centers(ten, kT0, ++generation)->empty());
  // Worked out again only when the federation (its generation) changes, a spec comes or is
  // forgotten: a spec asked for again, the same federation, the same answer.
  ScarceSpecs cached;
  Snapshot five = Federation(5);
  cached.Saw("h100-8", "p", kT0);
  auto first = cached.Centers(five, kT0, 7);
  cached.Saw("h100-8", "p", kT0 + absl::Hours(1));
  CHECK(cached.Centers(five, kT0 + absl::Hours(2), 7) == first);
  cached.Saw("nope", "p", kT0 + absl::Hours(2));  // a new spec
  auto second = cached.Centers(five, kT0 + absl::Hours(2), 7);
  CHECK(second != first);
  CHECK(second->size() == 1);
  five.FindMutable("h100")->available = false;
  CHECK(cached.Centers(five, kT0 + absl::Hours(2), 8)->empty());  // a new snapshot
  five.FindMutable("h100")->available = true;
  CHECK(cached.Centers(five, kT0 + absl::Hours(2), 9)->size() == 1);
  // The oldest's day is over (h100-8 was asked for last at 1 h): worked out again, same generation.
  CHECK(cached.Centers(five, kT0 + absl::Hours(26), 9)->empty());
  // Bounded: past kMaxSpecs the oldest goes.
  ScarceSpecs many;
  many.Saw("h100-8", "p", kT0);
  for (size_t i = 0; i < ScarceSpecs::kMaxSpecs; ++i) many.Saw(absl::StrCat("spec-", i), absl::StrCat("p", i), kT0 + absl::Seconds(1));
  CHECK(many.size() == ScarceSpecs::kMaxSpecs);
  CHECK(many.Centers(snap, kT0 + absl::Seconds(2), 1)->empty());
  // One project keeps at most kMaxSpecsPerProject specs: past it its own oldest goes, not
  // another project's.
  ScarceSpecs one;
  one.Saw("h100-8", "greedy", kT0);
  one.Saw("pair", "other", kT0);
  for (int i = 0; i < ScarceSpecs::kMaxSpecsPerProject; ++i) one.Saw(absl::StrCat("s", i), "greedy", kT0 + absl::Seconds(1));
  CHECK(one.size() == static_cast<size_t>(ScarceSpecs::kMaxSpecsPerProject) + 1);
  CHECK(one.Centers(Federation(10), kT0 + absl::Seconds(2), 1)->at("h100").spec_id == "pair");
  // A clock set back an hour: what was placed "later" is kept a day from now, not longer.
  ScarceSpecs skew;
  skew.Saw("h100-8", "p", kT0 + absl::Hours(1));
  CHECK(skew.Centers(snap, kT0, 1)->size() == 1);
  CHECK(skew.Centers(snap, kT0 + absl::Hours(24) + absl::Seconds(1), 2)->empty());
}

struct Placing {
  ScorerRegistry registry;
  WeightedSumModel model;
  WeightProfiles profiles = WeightProfiles::Builtin();
  Placer placer{registry, model};
  Placing() { RegisterBuiltinScorers(registry); }
  std::vector<double> Cost() {
    auto w = profiles.Resolve("cost", {}, registry);
    REQUIRE(w.ok());
    return *w;
  }
};

TEST_CASE("a replica that could run at five times as many centers as a scarce spec goes elsewhere when another center "
          "can start it now, unless it is bound to end within an hour there, and a waiting job's keep holds against "
          "short ones too [A16]",
          "[A16]") {
  Placing s;
  Snapshot snap = Federation(5);
  uint64_t generation = 0;
  ScarceSpecs specs;
  specs.Saw("h100-8", "p", kT0);
  PlacementRequest broad = MakeRequest();  // gpu-1: five centers could take it
  REQUIRE(CentersThatCouldEverTake(broad, snap).size() == 5);
  auto at = [&](const PlacementRequest& r) {
    auto d = s.placer.Place(r, snap, s.Cost());
    REQUIRE(d.center >= 0);
    return snap.centers()[d.center].id;
  };
  // Without the keep the cost profile takes the cheap h100.
  CHECK(at(broad) == "h100");
  broad.scarce_centers = specs.Centers(snap, kT0, ++generation);
  jointcloud::v1::ReplicaPlacement explain;
  auto d = s.placer.Place(broad, snap, s.Cost(), &explain);
  REQUIRE(d.center >= 0);
  CHECK(snap.centers()[d.center].id != "h100");
  bool said = false;
  for (const auto& e : explain.centers()) {
    if (e.center_id() != "h100") continue;
    said = true;
    CHECK(e.filtered_by() == kFilterKept);
    CHECK(e.reason() ==
          "kept for spec h100-8, placed within the last day, which only 1 center could run (this replica can run "
          "at 5, may run past an hour here, and another center can start it now)");
  }
  CHECK(said);
  // Bound to end within an hour there: by its time limit, or by its history's 90th
  // percentile at the center's speed (never its own estimate).
  PlacementRequest limited = broad;
  limited.time_limit = absl::Minutes(30);
  CHECK(at(limited) == "h100");
  PlacementRequest known = broad;
  known.backfill_runtime = absl::Hours(2);
  CHECK(at(known) != "h100");
  snap.FindMutable("h100")->performance_factor = 3;  // 2 h of work: 40 minutes here
  CHECK(at(known) == "h100");
  // ... but not once moving its data there first takes the rest of the hour.
  known.datasets.push_back(DatasetNeed{"ds", 4.0e6, false, {}});
  CHECK(at(known) != "h100");
  known.datasets.clear();
  snap.FindMutable("h100")->performance_factor = 1;
  // Its own word is no reason (only an enforced limit or learned runs count).
  PlacementRequest says_short = broad;
  says_short.expected_runtime = absl::Minutes(1);
  CHECK(at(says_short) != "h100");
  // Nowhere else can start it now: it takes h100 rather than wait.
  for (int i = 1; i < 5; ++i) snap.FindMutable(absl::StrCat("any-", i))->free.gpu = 0;
  CHECK(at(broad) == "h100");
  for (int i = 1; i < 5; ++i) snap.FindMutable(absl::StrCat("any-", i))->free.gpu = 8;
  // A replica that could run at fewer than five times as many centers does not give way.
  PlacementRequest pair = MakeRequest();
  pair.spec_id = "pair";
  pair.scarce_centers = broad.scarce_centers;
  CHECK(at(pair) == "h100");
  // A waiting job's keep is not passed by a short replica: a stream of them would take its
  // GPUs piecemeal for as long as the stream lasted.
  PlacementRequest kept_short = MakeRequest();
  kept_short.kept_centers["h100"] = 1;
  kept_short.time_limit = absl::Minutes(30);
  CHECK(at(kept_short) != "h100");
  // Where the job's own replicas run, a scarce spec keeps nothing from it (its CPU task
  // beside its trainer).
  PlacementRequest sibling = broad;
  sibling.sibling_centers = {"h100"};
  CHECK(at(sibling) == "h100");
}

TEST_CASE("a waiting job's keep comes before a scarce spec's: a scarce spec's center is somewhere else to start, and "
          "never the reason a waiting job's center is taken [A16]",
          "[A16]") {
  // helper-57: with the only other free center a scarce spec's, neither keep held and the
  // replica took the center a waiting job needs.
  Placing s;
  Snapshot snap = Federation(10);
  snap.FindMutable("any-1")->specs["gpu-1"].price = 0.5;  // the cheapest now
  for (int i = 2; i < 10; ++i) snap.FindMutable(absl::StrCat("any-", i))->free.gpu = 0;
  auto at = [&](const PlacementRequest& r) {
    auto d = s.placer.Place(r, snap, s.Cost());
    REQUIRE(d.center >= 0);
    return snap.centers()[d.center].id;
  };
  PlacementRequest broad = MakeRequest();
  CHECK(at(broad) == "any-1");
  broad.kept_centers["any-1"] = 2;  // a job two centers could run waits for any-1
  CHECK(at(broad) == "h100");
  ScarceSpecs specs;
  specs.Saw("h100-8", "p", kT0);
  broad.scarce_centers = specs.Centers(snap, kT0, 1);
  REQUIRE(broad.scarce_centers->contains("h100"));
  CHECK(at(broad) == "h100");
  // With any-1 not kept, the scarce keep holds when another center can start it: any-1.
  broad.kept_centers.clear();
  CHECK(at(broad) == "any-1");
}

TEST_CASE("a replica's breadth is counted again when the federation changes, its snapshot is built anew or a center's "
          "free capacity past its own is taken: a broad spec that fewer centers can hold gives way no longer [A16]",
          "[A16]") {
  Placing s;
  Snapshot snap = Federation(5);
  ScarceSpecs specs;
  specs.Saw("h100-8", "p", kT0);
  PlacementRequest broad = MakeRequest();  // gpu-1: five centers, five times h100-8's one
  broad.image_id.clear();                  // plain: its breadth is remembered for the generation
  auto at = [&](const PlacementRequest& r) {
    auto d = s.placer.Place(r, snap, s.Cost());
    REQUIRE(d.center >= 0);
    return snap.centers()[d.center].id;
  };
  broad.scarce_centers = specs.Centers(snap, kT0, 1);
  CHECK(at(broad) != "h100");
  // any-4 can no longer ever hold one GPU: four centers could run gpu-1, fewer than five
  // times h100-8's one, and the cheap h100 is taken again (a breadth remembered from the
  // generation before would still keep it).
  snap.FindMutable("any-4")->capacity.gpu = 0;
  snap.FindMutable("any-4")->free.gpu = 0;
  broad.scarce_centers = specs.Centers(snap, kT0, 2);
  REQUIRE(broad.scarce_centers->contains("h100"));
  CHECK(at(broad) == "h100");
  // The same generation, the snapshot built anew where it was (a refresh between two
  // decisions of one pass, helper-58): counted again, any-4 back.
  snap = Federation(5);
  CHECK(at(broad) != "h100");
  // A center that reports more free than it has (any-4: capacity for no GPU, eight free)
  // could take it only while that is free: once a reservation takes it, four centers are left.
  snap.FindMutable("any-4")->capacity.gpu = 0;
  broad.scarce_centers = specs.Centers(snap, kT0, 3);
  CHECK(at(broad) != "h100");
  snap.Reserve(snap.IndexOf("any-4"), Resources{0, 8, 0, 0, 0, 0});
  CHECK(at(broad) == "h100");
  snap.Release(snap.IndexOf("any-4"), Resources{0, 8, 0, 0, 0, 0});
  snap.FindMutable("any-4")->capacity.gpu = 8;
  // Counting stops at the limit asked for; without one it counts all.
  std::vector<int> some;
  CHECK(CentersThatCouldEverTake(broad, snap, RequestKeys(broad), 2, &some) == 2);
  CHECK(some.size() == 2);
  CHECK(CentersThatCouldEverTake(broad, snap, RequestKeys(broad), 100, nullptr) == 5);
  CHECK(CentersThatCouldEverTake(broad, snap).size() == 5);
}

}  // namespace
}  // namespace jc::scheduler
