// Placement decisions per second in-process (issue 5 bench (a), issue 48 item 2): every
// built-in scoring strategy weighted (the "default" profile), one replica per decision.
//
//   scheduler_decision_bench [centers=100] [decisions=auto] [threads=1] [offer_fraction=0.1] [only]
//   scheduler_decision_bench sweep [offer_fraction=0.1]
//
// The federation is built as a real one looks: each center offers a handful of the
// catalog's 40 specs, and the requested spec ("gpu-a100") is offered by `offer_fraction` of
// the centers (1 = every center, the old bench's shape); 5% of centers are unavailable,
// some lack the image and cannot be given it. Printed per size:
//   decisions/s        a decision as the scheduler makes it (snapshot indexed: only the
//                      centers offering the spec are visited);
//   scan/s             the same decisions visiting every center (snapshot not indexed):
//                      the peer, and the ratio;
//   recorded/s         a decision with its explanation kept as numbers, as the scheduler
//                      makes every placement (GetJobPlacement answers from the record);
//   explained/s        a decision whose explanation a user asked for (`plan`, `explain`):
//                      the decision, then the explanation built as the API returns it
//                      (every center with its filter and reason, or its scores, weights,
//                      notes, expected start, finish and cost, and the trade-off marks);
//   ns/feasible        nanoseconds of one decision per center that passes every filter:
//                      flat when the cost grows linearly in feasible centers;
//   kept/s             decisions/s with a scarce spec's keep in force (SPEC A16: an 8-GPU
//                      spec offered by one in ten of the centers offering the requested
//                      one, placed lately, keeps those centers from this broad replica; the
//                      request names an image, so its breadth is counted every decision, as
//                      far as the keep asks — the control plane's worst case).
// A single size also prints journaled/s: a decision with what the placement journal writes
// of it (the chosen center, the best scored and the first filtered: PlacementJournal::Kept,
// serialized), against the whole explanation built and then trimmed (its way until session
// 77), the peer, in the same run.
// `only` (decide, record, explain, journal or journal-whole) runs that figure alone, for a
// profiler.
// `sweep` prints that table for 10 to 10,000 centers, then at 10,000 centers for several
// offer fractions, as CSV after the table (for tests/bench/plot_placement.py).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/scheduler/filters.h"
#include "services/scheduler/placement_journal.h"
#include "services/scheduler/placer.h"
#include "services/scheduler/scarce_specs.h"
#include "services/scheduler/scoring/builtin_scorers.h"

using namespace jc::scheduler;

namespace {

constexpr const char* kSpec = "gpu-a100";

Snapshot MakeNetwork(int n, double offer_fraction) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  Snapshot snap;
  for (int i = 0; i < n; ++i) {
    CenterView c;
    c.id = absl::StrCat("center-", i);
    c.available = u(rng) > 0.05;
    c.described = true;
    c.security_grade = 1 + i % 5;
    c.topology = absl::StrCat("cn/r", i % 4, "/c", i % 13, "/dc", i);
    c.capacity = {512, 64, 0, 0, 4194304, 100000};
    c.free = {512 * u(rng), 64 * u(rng), 0, 0, 4194304 * u(rng), 100000};
    c.running_tasks = static_cast<int>(200 * u(rng));
    c.waiting_tasks = static_cast<int>(50 * u(rng));
    c.static_power_watts = 5000 + 10000 * u(rng);
    c.performance_factor = 0.5 + 2 * u(rng);
    c.network = {1000 + 9000 * u(rng), 50 * u(rng), 5 * u(rng), 0.01 * u(rng)};
    // Three other specs of the catalog's 40, and the requested one at `offer_fraction`.
    for (int k = 0; k < 3; ++k) {
      int other = static_cast<int>(39 * u(rng));
      c.specs[absl::StrCat("spec-", other)] =
          SpecAtCenter{{8.0 * (1 + other % 4), static_cast<double>(other % 3), 0, 0, 32768, 0}, 1 + 20 * u(rng), 300};
    }
    if (u(rng) < offer_fraction) {
      c.specs[kSpec] = SpecAtCenter{{4, 1, 0, 0, 16384, 0}, 5 + 20 * u(rng), 300 + 200 * u(rng)};
    }
    if (u(rng) < 0.8) c.images = {"pytorch-2.1", "tensorflow-2.15"};
    c.receives_images = u(rng) < 0.5;
    if (i % 7 == 0) c.datasets.insert("imagenet:2012");
    if (i % 11 == 0) c.datasets.insert("wiki:2024");
    snap.Upsert(std::move(c));
  }
  return snap;
}

PlacementRequest MakeRequest() {
  PlacementRequest r;
  r.job_id = "bench";
  r.spec_id = kSpec;
  r.image_id = "pytorch-2.1";
  r.image_size_mb = 8000;
  r.datasets.push_back({"imagenet:2012", 150000, false,
                         {TopologyPath::Parse("cn/r0/c0/dc0"), TopologyPath::Parse("cn/r3/c7/dc7")}});
  r.datasets.push_back({"wiki:2024", 20000, false, {TopologyPath::Parse("cn/r0/c0/dc0")}});
  r.sibling_centers = {"center-3"};
  r.now = absl::Now();
  r.deadline = r.now + absl::Hours(2);
  return r;
}

int Feasible(const Snapshot& snap, const PlacementRequest& req) {
  int n = 0;
  for (const auto& c : snap.centers()) n += FilterCenter(req, c, false, nullptr) == nullptr;
  return n;
}

enum class Mode { kDecide, kRecord, kExplain, kJournal, kJournalWhole };

// Decisions per second of one placer over `count` decisions.
double Run(const Snapshot& snap, const ScorerRegistry& registry, const std::vector<double>& weights, int count,
           Mode mode, int* placed, std::shared_ptr<const ScarceCenters> scarce) {
  WeightedSumModel model;
  Placer placer(registry, model);
  PlacementRequest req = MakeRequest();
  req.scarce_centers = std::move(scarce);
  jointcloud::v1::ReplicaPlacement shown;
  ReplicaRecord kept;
  PlacementRecord journaled;
  journaled.job_id = "job-1";
  journaled.replicas.resize(1);
  const PlacementJournalOptions journal;
  jointcloud::v1::Placement written;
  size_t bytes = 0;
  auto start = std::chrono::steady_clock::now();
  int ok = 0;
  for (int i = 0; i < count; ++i) {
    req.replica_index = i;
    if (mode == Mode::kJournal || mode == Mode::kJournalWhole) {
      ok += placer.Decide(req, snap, weights, &journaled.replicas[0]).center >= 0;
      if (mode == Mode::kJournal) {
        PlacementJournal::Kept(journal, journaled, registry, &written);
      } else {
        ToProto(journaled, registry, &written);
        PlacementJournal::Trim(journal, &written);
      }
      bytes += written.SerializeAsString().size();
    } else if (mode == Mode::kExplain) {
      ok += placer.Place(req, snap, weights, &shown).center >= 0;
    } else if (mode == Mode::kRecord) {
      ok += placer.Decide(req, snap, weights, &kept).center >= 0;
    } else {
      ok += placer.Place(req, snap, weights).center >= 0;
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (bytes == 1) std::printf("%zu\n", bytes);  // the documents are used
  *placed = ok;
  return count / secs;
}

// Runs `count` decisions on each of `threads` threads; the sum of their rates.
double Parallel(const Snapshot& snap, const ScorerRegistry& registry, const std::vector<double>& weights, int count,
                Mode mode, int threads, int* placed, std::shared_ptr<const ScarceCenters> scarce = nullptr) {
  std::vector<double> rates(threads);
  std::vector<int> ok(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { rates[t] = Run(snap, registry, weights, count, mode, &ok[t], scarce); });
  }
  for (auto& th : pool) th.join();
  double total = 0;
  for (double r : rates) total += r;
  *placed = ok[0];
  return total;
}

struct Row {
  int centers = 0, offering = 0, feasible = 0;
  double decisions = 0, scan = 0, recorded = 0, explained = 0, kept = 0;
};

// The federation with an 8-GPU spec at one in ten of the centers offering the requested
// one, placed a minute ago: the centers kept for it (ScarceSpecs, as a pass works them out).
std::shared_ptr<const ScarceCenters> WithScarceSpec(Snapshot& snap) {
  const std::vector<int>* offering = snap.CentersOffering(CenterView::Key(kSpec));
  if (offering == nullptr) return nullptr;
  const std::vector<int> centers = *offering;
  for (size_t k = 0; k < centers.size(); k += 10) {
    snap.MutableAt(centers[k]).specs["gpu-h100x8"] = SpecAtCenter{{32, 8, 0, 0, 131072, 0}, 40, 3200};
  }
  snap.Reindex();
  ScarceSpecs specs;
  const absl::Time now = absl::Now();
  specs.Saw("gpu-h100x8", "bench", now - absl::Minutes(1));
  auto kept = specs.Centers(snap, now, 1);
  return kept->empty() ? nullptr : kept;
}

// About `budget_ms` of decisions at each figure, at least 20.
Row Measure(int centers, double fraction, const ScorerRegistry& registry, const std::vector<double>& weights,
            int decisions, int threads, bool verbose) {
  Row row;
  row.centers = centers;
  Snapshot snap = MakeNetwork(centers, fraction);
  Snapshot unindexed = snap;
  snap.Reindex();
  const PlacementRequest req = MakeRequest();
  row.feasible = Feasible(snap, req);
  if (const auto* offering = snap.CentersOffering(CenterView::Key(req.spec_id))) row.offering = offering->size();
  auto count_for = [&](int base) { return std::max(20, decisions > 0 ? decisions : base); };
  int placed = 0;
  const int n = count_for(static_cast<int>(2e7 / (centers + 10 * row.feasible + 50)));
  row.decisions = Parallel(snap, registry, weights, n, Mode::kDecide, threads, &placed);
  if (verbose) std::printf("  decisions: %d of %d placed\n", placed, n);
  row.scan = Parallel(unindexed, registry, weights, std::max(20, n / 4), Mode::kDecide, threads, &placed);
  row.recorded = Parallel(snap, registry, weights, std::max(20, n / 10), Mode::kRecord, threads, &placed);
  const int e = std::max(20, n / 40);
  row.explained = Parallel(snap, registry, weights, e, Mode::kExplain, threads, &placed);
  if (verbose) {
    std::printf("  explained: %d of %d placed\n", placed, e);
    // What the placement journal writes of each placement, against the old way, alternated.
    double kept_way = 0, whole_way = 0;
    for (int round = 0; round < 3; ++round) {
      kept_way = std::max(kept_way, Parallel(snap, registry, weights, e, Mode::kJournal, threads, &placed));
      whole_way = std::max(whole_way, Parallel(snap, registry, weights, e, Mode::kJournalWhole, threads, &placed));
    }
    std::printf("  journaled: %.0f/s a decision with its kept explanation built and serialized; %.0f/s with the "
                "whole explanation built, then trimmed (%.1fx; the best of 3 rounds each)\n",
                kept_way, whole_way, kept_way / std::max(1.0, whole_way));
  }
  Snapshot scarce_snap = snap;
  if (auto scarce = WithScarceSpec(scarce_snap)) {
    row.kept = Parallel(scarce_snap, registry, weights, n, Mode::kDecide, threads, &placed, scarce);
    if (verbose) std::printf("  kept: %d of %d placed, %zu centers kept\n", placed, n, scarce->size());
  }
  return row;
}

void PrintHeader() {
  std::printf("%8s %9s %9s %13s %11s %10s %9s %12s %11s %12s %11s\n", "centers", "offering", "feasible", "decisions/s",
              "us/decision", "scan/s", "vs scan", "ns/feasible", "recorded/s", "explained/s", "kept/s");
}

void Print(const Row& r) {
  std::printf("%8d %9d %9d %13.0f %11.2f %10.0f %8.1fx %12.0f %11.0f %12.0f %11.0f\n", r.centers, r.offering,
              r.feasible, r.decisions, 1e6 / r.decisions, r.scan, r.decisions / r.scan,
              1e9 / r.decisions / std::max(1, r.feasible), r.recorded, r.explained, r.kept);
}

}  // namespace

int main(int argc, char** argv) {
  ScorerRegistry registry;
  RegisterBuiltinScorers(registry);
  auto weights = *WeightProfiles::Builtin().Resolve("", {}, registry);

  if (argc > 1 && std::strcmp(argv[1], "sweep") == 0) {
    const double fraction = argc > 2 ? std::atof(argv[2]) : 0.1;
    std::printf("placement cost by federation size: %zu scorers (all weighted), one thread, the spec offered by "
                "%.0f%% of centers\n",
                registry.size(), 100 * fraction);
    PrintHeader();
    struct Entry {
      const char* table;
      double fraction;
      Row row;
    };
    std::vector<Entry> rows;
    for (int centers : {10, 30, 100, 300, 1000, 3000, 10000}) {
      Row r = Measure(centers, fraction, registry, weights, 0, 1, false);
      Print(r);
      rows.push_back({"size", fraction, r});
    }
    std::printf("\nat 10000 centers, by the share of centers offering the spec:\n");
    PrintHeader();
    for (double f : {0.01, 0.03, 0.1, 0.3, 1.0}) {
      Row r = Measure(10000, f, registry, weights, 0, 1, false);
      Print(r);
      rows.push_back({"share", f, r});
    }
    std::printf(
        "\ncsv:table,offer_fraction,centers,offering,feasible,decisions_per_s,scan_per_s,recorded_per_s,"
        "explained_per_s,kept_per_s\n");
    for (const auto& [table, f, r] : rows) {
      std::printf("csv:%s,%g,%d,%d,%d,%.0f,%.0f,%.0f,%.0f,%.0f\n", table, f, r.centers, r.offering, r.feasible,
                  r.decisions, r.scan, r.recorded, r.explained, r.kept);
    }
    return 0;
  }

  const int centers = argc > 1 ? std::atoi(argv[1]) : 100;
  const int decisions = argc > 2 ? std::atoi(argv[2]) : 200000;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  const double fraction = argc > 4 ? std::atof(argv[4]) : 0.1;
  if (argc > 5) {
    const std::string only = argv[5];
    const Mode mode = only == "record"          ? Mode::kRecord
                      : only == "explain"       ? Mode::kExplain
                      : only == "journal"       ? Mode::kJournal
                      : only == "journal-whole" ? Mode::kJournalWhole
                                                : Mode::kDecide;
    Snapshot snap = MakeNetwork(centers, fraction);
    snap.Reindex();
    int placed = 0;
    const double rate = Parallel(snap, registry, weights, decisions, mode, threads, &placed);
    std::printf("%s: %.0f/s (%d of %d placed)\n", only.c_str(), rate, placed, decisions);
    return 0;
  }
  std::printf("scheduler decisions: %d centers, %zu scorers (all weighted), the spec offered by %.0f%% of centers, "
              "%d thread(s)\n",
              centers, registry.size(), 100 * fraction, threads);
  Row r = Measure(centers, fraction, registry, weights, decisions, threads, true);
  PrintHeader();
  Print(r);
  return 0;
}
