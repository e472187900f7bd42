// Issue 48 item 2: a decision on an indexed snapshot (only the centers offering the spec
// visited) decides exactly what one visiting every center decides, and its explanation,
// kept as numbers and made into the protobuf when asked, says for every center what the
// filters and strategies said. Checked on random federations and requests.

#include <catch2/catch.hpp>
#include <google/protobuf/util/message_differencer.h>

#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "services/scheduler/filters.h"
#include "services/scheduler/placement_journal.h"
#include "services/scheduler/placement_record.h"
#include "services/scheduler/placer.h"
#include "services/scheduler/scoring/builtin_scorers.h"

namespace jc::scheduler {
namespace {

namespace pb = ::jointcloud::v1;
using google::protobuf::util::MessageDifferencer;

const std::vector<std::string> kSpecs = {"gpu-a", "gpu-b", "cpu-8", "npu-1", "gpu-x"};

struct Random {
  std::mt19937 rng;
  explicit Random(uint32_t seed) : rng(seed) {}
  double U() { return std::uniform_real_distribution<double>(0, 1)(rng); }
  int Int(int n) { return static_cast<int>(U() * n) % n; }
  bool Chance(double p) { return U() < p; }
};

Snapshot RandomFederation(Random& r, int n) {
  Snapshot snap;
  for (int i = 0; i < n; ++i) {
    CenterView c;
    c.id = absl::StrCat("c", i);
    c.available = r.Chance(0.85);
    c.described = true;
    c.security_grade = 1 + r.Int(5);
    c.topology = absl::StrCat("cn/r", r.Int(3), "/c", r.Int(5), "/dc", i);
    c.capacity = {64, 8, 0, 0, 512000, 1000};
    c.free = {64 * r.U(), static_cast<double>(r.Int(9)), 0, 0, 512000 * r.U(), 1000};
    c.running_tasks = r.Int(40);
    c.waiting_tasks = r.Int(10);
    c.static_power_watts = 1000 + 5000 * r.U();
    c.performance_factor = 0.5 + 2 * r.U();
    c.network = {100 + 9000 * r.U(), 50 * r.U(), 5 * r.U(), 0.01 * r.U()};
    if (r.Chance(0.2)) {
      c.runs_any_project = false;
      if (r.Chance(0.5)) c.run_as_projects.insert("p1");
      if (r.Chance(0.5)) c.run_as_users.insert("u1");
    }
    for (int k = 0; k < 4; ++k) {  // "gpu-x" is offered by none
      if (r.Chance(0.35)) {
        c.specs[kSpecs[k]] = SpecAtCenter{{4.0 * (1 + k), static_cast<double>(k % 2), 0, 0, 16384, 0},
                                          1 + 20 * r.U(), 100 + 300 * r.U()};
      }
    }
    if (r.Chance(0.3)) c.reported_start_delay["gpu-a"] = absl::Seconds(600 * r.U());
    if (r.Chance(0.7)) c.images.insert("img");
    c.receives_images = r.Chance(0.4);
    c.runs_images = r.Chance(0.5);
    c.port_range_size = r.Int(3);
    if (r.Chance(0.3)) c.datasets.insert("ds:1");
    if (r.Chance(0.2)) c.datasets.insert("private:1");
    snap.Upsert(std::move(c));
  }
  return snap;
}

PlacementRequest RandomRequest(Random& r, int n) {
  PlacementRequest q;
  q.job_id = "job";
  q.spec_id = kSpecs[r.Int(static_cast<int>(kSpecs.size()))];
  auto some_center = [&] { return absl::StrCat("c", r.Int(n + 2)); };  // now and then one that is not there
  if (r.Chance(0.15)) {
    for (int k = 0, count = 1 + r.Int(3); k < count; ++k) q.pinned_centers.push_back(some_center());
  }
  if (r.Chance(0.1)) q.excluded_center = some_center();
  q.min_security_grade = r.Int(5);
  if (r.Chance(0.5)) q.project = r.Chance(0.5) ? "p1" : "p2";
  if (r.Chance(0.5)) q.user = r.Chance(0.5) ? "u1" : "u2";
  if (r.Chance(0.2)) {
    for (int k = 0, count = 1 + r.Int(4); k < count; ++k) q.avoid_centers.insert(some_center());
  }
  if (r.Chance(0.2)) {
    for (int k = 0, count = 1 + r.Int(4); k < count; ++k) q.kept_centers[some_center()] = 1 + r.Int(4);
  }
  if (r.Chance(0.15)) q.draining_centers[some_center()] = r.Chance(0.5) ? absl::InfiniteFuture() : absl::Now();
  q.consider_busy_centers = r.Chance(0.3);
  if (r.Chance(0.7)) q.image_id = "img";
  if (r.Chance(0.2)) q.image_content = "sha256:abc";
  q.image_size_mb = 5000;
  q.ports = r.Int(3);
  if (r.Chance(0.5)) q.datasets.push_back({"ds:1", 20000, false, {TopologyPath::Parse("cn/r0/c1")}});
  if (r.Chance(0.2)) q.datasets.push_back({"private:1", 100, true, {}});
  if (r.Chance(0.3)) q.sibling_centers = {some_center()};
  q.now = absl::FromUnixSeconds(1700000000);
  q.deadline = q.now + absl::Hours(1 + r.Int(3));
  return q;
}

struct Placers {
  ScorerRegistry registry;
  WeightedSumModel model;
  std::vector<double> weights;
  Placers() {
    RegisterBuiltinScorers(registry);
    weights = *WeightProfiles::Builtin().Resolve("", {}, registry);
  }
};

TEST_CASE("an indexed snapshot decides and explains exactly what a scan of every center does [A8][A9]",
          "[A8][A9]") {
  Placers p;
  int decided = 0, placed = 0, explained = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    Random r(seed);
    const int n = std::vector<int>{1, 3, 12, 40, 150}[seed % 5];
    Snapshot scanned = RandomFederation(r, n);
    Snapshot indexed = scanned;
    indexed.Reindex();
    REQUIRE_FALSE(scanned.indexed());
    Placer on_index(p.registry, p.model), on_scan(p.registry, p.model);
    for (int k = 0; k < 25; ++k) {
      const PlacementRequest q = RandomRequest(r, n);
      INFO("seed " << seed << " request " << k << " spec " << q.spec_id);
      // Unexplained: the fast path.
      const ReplicaDecision a = on_index.Decide(q, indexed, p.weights, nullptr);
      const ReplicaDecision b = on_scan.Decide(q, scanned, p.weights, nullptr);
      CHECK(a.center == b.center);
      CHECK(a.total == b.total);
      CHECK(a.fits_now == b.fits_now);
      CHECK(a.reason == b.reason);
      ++decided;
      placed += a.center >= 0;
      // Explained, as the API shows it.
      pb::ReplicaPlacement shown_index, shown_scan;
      const ReplicaDecision c = on_index.Place(q, indexed, p.weights, &shown_index);
      on_scan.Place(q, scanned, p.weights, &shown_scan);
      CHECK(c.center == a.center);
      std::string diff;
      MessageDifferencer differ;
      differ.ReportDifferencesToString(&diff);
      CHECK(differ.Compare(shown_index, shown_scan));
      CHECK(diff == "");
      REQUIRE(shown_index.centers_size() == n);
      // Every center's verdict is the filter's own, with its own sentence.
      for (int i = 0; i < n; ++i) {
        const pb::CenterEvaluation& e = shown_index.centers(i);
        const CenterView& center = indexed.centers()[i];
        CHECK(e.center_id() == center.id);
        if (e.feasible()) {
          CHECK(FilterCenter(q, center, true, nullptr) == nullptr);
          CHECK(e.scores_size() == static_cast<int>(p.registry.size()));
          continue;
        }
        const std::string filter = e.filtered_by();
        if (filter == kFilterKept) continue;  // the placer's preference, not a filter
        std::string why;
        const char* own = FilterCenter(q, center, filter != kFilterAvoid, &why);
        REQUIRE(own != nullptr);
        CHECK(filter == own);
        CHECK(e.reason() == why);
        ++explained;
      }
    }
  }
  // The random requests reach both answers and the filters.
  CHECK(placed > decided / 5);
  CHECK(placed < decided);
  CHECK(explained > 1000);
}

TEST_CASE("a job's replicas placed on an indexed snapshot reserve what a scan's do, gang or not [A8][A9]",
          "[A8][A9]") {
  Placers p;
  for (uint32_t seed = 100; seed < 140; ++seed) {
    Random r(seed);
    const int n = 5 + r.Int(60);
    Snapshot scanned = RandomFederation(r, n);
    Snapshot indexed = scanned;
    indexed.Reindex();
    Placer on_index(p.registry, p.model), on_scan(p.registry, p.model);
    for (int job = 0; job < 6; ++job) {
      PlacementRequest q = RandomRequest(r, n);
      q.pinned_centers.clear();
      std::vector<PlacementRequest> replicas;
      for (int k = 0, count = 1 + r.Int(4); k < count; ++k) {
        replicas.push_back(q);
        replicas.back().replica_index = k;
      }
      const bool gang = r.Chance(0.5);
      INFO("seed " << seed << " job " << job << " gang " << gang);
      PlacementRecord kept;
      const JobDecision a = on_index.DecideJob(replicas, indexed, p.weights, gang, &kept);
      pb::Placement shown_scan;
      const JobDecision b = on_scan.PlaceJob(replicas, scanned, p.weights, gang, &shown_scan);
      CHECK(a.placed == b.placed);
      CHECK(a.centers == b.centers);
      CHECK(a.reason == b.reason);
      pb::Placement shown_index;
      ToProto(kept, p.registry, &shown_index);
      CHECK(MessageDifferencer::Equals(shown_index, shown_scan));
      // The reservations kept the indexes (and the load sums) true.
      REQUIRE(indexed.indexed());
      CHECK(indexed.load_sum() == scanned.load_sum());
      CHECK(indexed.load_sum_squares() == scanned.load_sum_squares());
      for (int i = 0; i < n; ++i) CHECK(indexed.centers()[i].free.cpu == scanned.centers()[i].free.cpu);
    }
  }
}

TEST_CASE("a snapshot changed through its mutators drops its indexes until reindexed [A8]", "[A8]") {
  Random r(7);
  Snapshot snap = RandomFederation(r, 10);
  snap.Reindex();
  REQUIRE(snap.indexed());
  const size_t offering = snap.CentersOffering(CenterView::Key(kSpecs[0]))->size();
  // A center that now offers the spec is found only after Reindex: meanwhile the decision
  // visits every center.
  snap.FindMutable("c0")->specs[kSpecs[0]] = SpecAtCenter{{1, 0, 0, 0, 1, 0}, 1, 1};
  CHECK_FALSE(snap.indexed());
  CHECK(snap.CentersOffering(CenterView::Key(kSpecs[0])) == nullptr);
  snap.Reindex();
  const std::vector<int>* now = snap.CentersOffering(CenterView::Key(kSpecs[0]));
  REQUIRE(now != nullptr);
  CHECK(now->front() == 0);
  CHECK(now->size() >= offering);
  CHECK(snap.CentersOffering(CenterView::Key(std::string("nobody-offers-this")))->empty());
  snap.MutableAt(1).available = false;
  CHECK_FALSE(snap.indexed());
  snap.Reindex();
  snap.Remove("c2");
  CHECK_FALSE(snap.indexed());
}

// The trade-off marks against their definition, checked pair by pair.
TEST_CASE("the Pareto marks of an explanation are the centers no other is as soon and as cheap as [A16]",
          "[A16]") {
  Random r(3);
  for (int round = 0; round < 200; ++round) {
    pb::ReplicaPlacement explain;
    const int n = 1 + r.Int(30);
    for (int i = 0; i < n; ++i) {
      pb::CenterEvaluation* e = explain.add_centers();
      e->set_center_id(absl::StrCat("c", i));
      e->set_feasible(r.Chance(0.8));
      // Few distinct values, so that ties are common; an infinite cost now and then (a
      // center reporting a performance factor near 0: helper-43).
      e->set_expected_finish_seconds(r.Int(6) * 100);
      e->set_expected_cost(r.Chance(0.15) ? std::numeric_limits<double>::infinity() : r.Int(6) * 1.5);
    }
    MarkTradeOff(&explain, "c0");
    for (const auto& e : explain.centers()) {
      const bool pareto = std::find(e.marks().begin(), e.marks().end(), "pareto") != e.marks().end();
      if (!e.feasible()) {
        CHECK_FALSE(pareto);
        continue;
      }
      bool dominated = false;
      for (const auto& o : explain.centers()) {
        if (&o == &e || !o.feasible()) continue;
        dominated |= o.expected_finish_seconds() <= e.expected_finish_seconds() &&
                     o.expected_cost() <= e.expected_cost() &&
                     (o.expected_finish_seconds() < e.expected_finish_seconds() || o.expected_cost() < e.expected_cost());
      }
      CHECK(pareto == !dominated);
    }
  }
}

TEST_CASE("a lone center of infinite expected cost is on the front, and equal infinite costs dominate nothing "
          "[A16]",
          "[A16]") {
  const double inf = std::numeric_limits<double>::infinity();
  pb::ReplicaPlacement explain;
  for (const auto& [id, cost] : std::vector<std::pair<std::string, double>>{{"a", inf}, {"b", inf}}) {
    pb::CenterEvaluation* e = explain.add_centers();
    e->set_center_id(id);
    e->set_feasible(true);
    e->set_expected_finish_seconds(100);
    e->set_expected_cost(cost);
  }
  MarkTradeOff(&explain, "a");
  for (const auto& e : explain.centers()) {
    INFO(e.center_id());
    CHECK(std::find(e.marks().begin(), e.marks().end(), "pareto") != e.marks().end());
  }
}

TEST_CASE("an explanation strides its scores by the registry whatever the caller's weights hold, and a job's "
          "explanation keeps what the caller's message held [A8][A9]",
          "[A8][A9]") {
  Placers p;
  Random r(11);
  Snapshot snap = RandomFederation(r, 30);
  snap.Reindex();
  PlacementRequest q = RandomRequest(r, 30);
  q.spec_id = "gpu-a";
  q.pinned_centers.clear();
  q.min_security_grade = 0;
  std::vector<double> longer = p.weights;
  longer.push_back(0);
  Placer placer(p.registry, p.model);
  pb::ReplicaPlacement exact, padded;
  placer.Place(q, snap, p.weights, &exact);
  placer.Place(q, snap, longer, &padded);
  CHECK(MessageDifferencer::Equals(exact, padded));

  pb::Placement shown;
  shown.set_job_id("job-1");
  shown.add_expected_durations("task a: 1h");
  placer.PlaceJob({q}, snap, p.weights, false, &shown);
  CHECK(shown.job_id() == "job-1");
  CHECK(shown.expected_durations_size() == 1);
  CHECK(shown.replicas_size() == 1);
}

TEST_CASE("the placement journal's kept explanation, built from the numbers, is the whole explanation trimmed, "
          "marks and all [A16]",
          "[A16]") {
  Placers p;
  int left_out = 0, marked = 0, compared = 0;
  pb::Placement kept;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Random r(seed);
    const int n = std::vector<int>{1, 3, 12, 40, 150}[seed % 5];
    Snapshot snap = RandomFederation(r, n);
    snap.Reindex();
    Placer placer(p.registry, p.model);
    for (int k = 0; k < 5; ++k) {
      std::vector<PlacementRequest> job;
      for (int c = 0, count = 1 + r.Int(20); c < count; ++c) job.push_back(RandomRequest(r, n));
      PlacementRecord record;
      record.job_id = "job-1";
      placer.DecideJob(job, snap, p.weights, r.Chance(0.3), &record);
      for (size_t t = 0; t < job.size(); ++t) record.expected_durations.push_back(std::string(r.Int(300), 'd') + "é");
      PlacementJournalOptions o;
      o.max_replicas = 1 + r.Int(16);
      o.top_scored = r.Int(6);  // 0: none scored kept but the chosen
      o.filtered = r.Int(9);
      o.max_reason_bytes = 10 + r.Int(200);
      INFO("seed " << seed << " job " << k << " replicas " << job.size());
      pb::Placement whole;
      ToProto(record, p.registry, &whole);
      PlacementJournal::Trim(o, &whole);
      PlacementJournal::Kept(o, record, p.registry, &kept);  // into the last one's message, as a flush does
      std::string diff;
      MessageDifferencer differ;
      differ.ReportDifferencesToString(&diff);
      CHECK(differ.Compare(whole, kept));
      CHECK(diff == "");
      ++compared;
      for (const auto& rep : kept.replicas()) {
        left_out += rep.centers_left_out();
        for (const auto& c : rep.centers()) marked += c.marks_size();
      }
    }
  }
  // The cases cut centers away and keep marked ones.
  CHECK(compared == 200);
  CHECK(left_out > 1000);
  CHECK(marked > 100);
}

TEST_CASE("the load sums an indexed snapshot keeps are a fresh sum's, however large the loads [A9]", "[A9]") {
  Snapshot snap;
  for (int load : {166397250, 197678193, 3}) {
    CenterView c;
    c.id = absl::StrCat("c", load);
    c.running_tasks = load;
    snap.Upsert(std::move(c));
  }
  Snapshot fresh = snap;
  snap.Reindex();
  for (int k = 0; k < 5; ++k) {
    snap.Reserve(k % 3, {1, 0, 0, 0, 1, 0});
    fresh.Reserve(k % 3, {1, 0, 0, 0, 1, 0});
    REQUIRE(snap.indexed());
    CHECK(snap.load_sum() == fresh.load_sum());
    CHECK(snap.load_sum_squares() == fresh.load_sum_squares());
  }
  snap.Release(1, {1, 0, 0, 0, 1, 0});
  fresh.Release(1, {1, 0, 0, 0, 1, 0});
  CHECK(snap.load_sum_squares() == fresh.load_sum_squares());
}

}  // namespace
}  // namespace jc::scheduler
