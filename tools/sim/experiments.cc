#include "tools/sim/experiments.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jc::sim {
namespace {

int ThreadsFor(int threads, size_t work) {
  int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(std::min<size_t>(n, std::max<size_t>(work, 1)));
}

// Calls fn(i) for i in [0, n) on `threads` threads.
template <typename Fn>
void ParallelFor(size_t n, int threads, Fn&& fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < ThreadsFor(threads, n); ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

// Student's t at 97.5% for n-1 degrees of freedom.
double T975(int n) {
  static const double table[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262,
                                 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093};
  int df = n - 1;
  if (df <= 0) return 0;
  return df < static_cast<int>(std::size(table)) ? table[df] : 1.96;
}

}  // namespace

absl::StatusOr<std::vector<RunResult>> RunAll(const Federation& federation, const std::vector<TraceJob>& trace,
                                              const std::vector<SimOptions>& runs, const PolicyCatalog& catalog,
                                              int threads) {
  std::vector<absl::StatusOr<RunResult>> results(runs.size(), absl::UnknownError("not run"));
  ParallelFor(runs.size(), threads, [&](size_t i) { results[i] = Simulate(federation, trace, runs[i], catalog); });
  std::vector<RunResult> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

Estimate EstimateOf(const std::vector<double>& samples) {
  Estimate e;
  e.n = static_cast<int>(samples.size());
  if (samples.empty()) return e;
  for (double s : samples) e.mean += s;
  e.mean /= e.n;
  if (e.n < 2) return e;
  double var = 0;
  for (double s : samples) var += (s - e.mean) * (s - e.mean);
  var /= e.n - 1;
  e.ci95 = T975(e.n) * std::sqrt(var / e.n);
  return e;
}

absl::StatusOr<std::vector<SweepPoint>> Sweep(const Federation& federation, const SweepOptions& options,
                                              const PolicyCatalog& catalog, int threads) {
  if (options.loads.empty() || options.seeds <= 0 || options.policies.empty()) {
    return absl::InvalidArgumentError("sweep: needs loads, at least one seed and at least one policy");
  }
  struct Cell {
    size_t load, seed;
    Federation federation;
    std::vector<TraceJob> trace;
  };
  std::vector<Cell> cells;
  for (size_t l = 0; l < options.loads.size(); ++l) {
    for (int s = 0; s < options.seeds; ++s) {
      Cell cell{l, static_cast<size_t>(s), federation, {}};
      GeneratorOptions g = options.generator;
      g.load = options.loads[l];
      g.seed = options.generator.seed + s;
      absl::StatusOr<std::vector<TraceJob>> trace = GenerateTrace(g, cell.federation);
      if (!trace.ok()) return trace.status();
      cell.trace = std::move(*trace);
      cells.push_back(std::move(cell));
    }
  }
  const size_t P = options.policies.size();
  std::vector<absl::StatusOr<RunResult>> results(cells.size() * P, absl::UnknownError("not run"));
  ParallelFor(results.size(), threads, [&](size_t i) {
    const Cell& cell = cells[i / P];
    SimOptions o;
    o.policy = options.policies[i % P];
    o.queue = options.queue;
    o.oracle_durations = options.oracle_durations;
    o.center_reports = options.center_reports;
    o.seed = options.generator.seed + cell.seed;
    results[i] = Simulate(cell.federation, cell.trace, o, catalog);
  });
  std::vector<SweepPoint> points;
  for (size_t l = 0; l < options.loads.size(); ++l) {
    for (size_t p = 0; p < P; ++p) {
      std::vector<double> jct, p95, wait, cost, energy, util, jain;
      double never = 0;
      for (size_t c = 0; c < cells.size(); ++c) {
        if (cells[c].load != l) continue;
        const auto& r = results[c * P + p];
        if (!r.ok()) return r.status();
        const RunMetrics& m = r->metrics;
        jct.push_back(m.mean_jct);
        p95.push_back(m.p95_jct);
        wait.push_back(m.mean_wait);
        cost.push_back(m.cost);
        energy.push_back(m.energy_kwh);
        util.push_back(m.mean_gpu_utilisation);
        jain.push_back(m.jain_fairness);
        never += m.never_ran;
      }
      SweepPoint pt;
      pt.policy = options.policies[p];
      pt.load = options.loads[l];
      pt.mean_jct = EstimateOf(jct);
      pt.p95_jct = EstimateOf(p95);
      pt.mean_wait = EstimateOf(wait);
      pt.cost = EstimateOf(cost);
      pt.energy_kwh = EstimateOf(energy);
      pt.utilisation = EstimateOf(util);
      pt.jain = EstimateOf(jain);
      pt.never_ran = never / options.seeds;
      points.push_back(std::move(pt));
    }
  }
  return points;
}

absl::StatusOr<double> Objective(const RunMetrics& m, const std::string& objective) {
  double incomplete = m.jobs - m.completed;
  double scale = m.completed > 0 ? static_cast<double>(m.jobs) / m.completed : 1e9;
  if (objective == "mean_jct") return m.jobs > 0 ? (m.mean_jct * m.completed + m.makespan * incomplete) / m.jobs : 0;
  if (objective == "p95_jct") return incomplete > 0 ? std::max(m.p95_jct, m.makespan) : m.p95_jct;
  if (objective == "mean_wait") return m.jobs > 0 ? (m.mean_wait * (m.jobs - m.never_ran) + m.makespan * m.never_ran) / m.jobs : 0;
  if (objective == "cost") return m.cost * scale;
  if (objective == "energy_kwh") return m.energy_kwh * scale;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown objective \"", objective, "\" (mean_jct, p95_jct, mean_wait, cost, energy_kwh)"));
}

std::string WeightsPolicy(const std::map<std::string, double>& weights) {
  std::vector<std::string> parts;
  for (const auto& [id, w] : weights) parts.push_back(absl::StrCat(id, "=", w));
  return absl::StrCat("weights:", absl::StrJoin(parts, ","));
}

absl::StatusOr<TuneResult> Tune(const Federation& federation, const std::vector<TraceJob>& train,
                                const std::vector<TraceJob>& holdout, const TuneOptions& options,
                                const PolicyCatalog& catalog, int threads) {
  if (absl::StatusOr<double> probe = Objective(RunMetrics{}, options.objective); !probe.ok()) return probe.status();
  if (options.evaluations < 2 || options.grid.empty()) {
    return absl::InvalidArgumentError("tune: needs at least 2 evaluations and a non-empty grid");
  }
  std::vector<std::string> ids;
  for (const auto& s : catalog.scorers.scorers()) ids.emplace_back(s->id());
  auto evaluate = [&](const std::vector<std::map<std::string, double>>& candidates,
                      const std::vector<TraceJob>& trace) -> absl::StatusOr<std::vector<double>> {
    std::vector<SimOptions> runs;
    for (const auto& w : candidates) {
      SimOptions o;
      o.policy = WeightsPolicy(w);
      o.queue = options.queue;
      o.oracle_durations = options.oracle_durations;
      o.seed = options.seed;
      runs.push_back(o);
    }
    absl::StatusOr<std::vector<RunResult>> results = RunAll(federation, trace, runs, catalog, threads);
    if (!results.ok()) return results.status();
    std::vector<double> values;
    for (const auto& r : *results) values.push_back(*Objective(r.metrics, options.objective));
    return values;
  };

  std::map<std::string, double> ones;
  for (const auto& id : ids) ones[id] = 1;
  TuneResult result;
  std::mt19937_64 rng(options.seed);
  // Random restarts: half the budget, the default among them.
  std::vector<std::map<std::string, double>> batch = {ones};
  int randoms = std::max(1, options.evaluations / 2) - 1;
  for (int i = 0; i < randoms; ++i) {
    std::map<std::string, double> w;
    bool any = false;
    for (const auto& id : ids) {
      w[id] = options.grid[rng() % options.grid.size()];
      any |= w[id] > 0;
    }
    if (!any) w[ids[rng() % ids.size()]] = 1;
    batch.push_back(std::move(w));
  }
  absl::StatusOr<std::vector<double>> values = evaluate(batch, train);
  if (!values.ok()) return values.status();
  result.evaluated += static_cast<int>(batch.size());
  result.default_train = (*values)[0];
  size_t best = std::min_element(values->begin(), values->end()) - values->begin();
  std::map<std::string, double> best_weights = batch[best];
  double best_value = (*values)[best];
  // Coordinate descent: each strategy's weight over the grid, the others fixed; every
  // value of one coordinate is simulated in parallel.
  bool improved = true;
  while (improved && result.evaluated < options.evaluations) {
    improved = false;
    for (const auto& id : ids) {
      if (result.evaluated >= options.evaluations) break;
      std::vector<std::map<std::string, double>> tries;
      for (double g : options.grid) {
        if (g == best_weights[id]) continue;
        auto w = best_weights;
        w[id] = g;
        bool any = false;
        for (const auto& [k, v] : w) any |= v > 0;
        if (any) tries.push_back(std::move(w));
      }
      if (tries.empty()) continue;
      absl::StatusOr<std::vector<double>> v = evaluate(tries, train);
      if (!v.ok()) return v.status();
      result.evaluated += static_cast<int>(tries.size());
      for (size_t i = 0; i < tries.size(); ++i) {
        // Only a real gain (0.1%) moves the search: noise-level ties keep the simpler weights.
        if ((*v)[i] < best_value * 0.999) {
          best_value = (*v)[i];
          best_weights = tries[i];
          improved = true;
        }
      }
    }
  }
  result.weights = best_weights;
  result.train = best_value;
  absl::StatusOr<std::vector<double>> held = evaluate({best_weights, ones}, holdout);
  if (!held.ok()) return held.status();
  result.holdout = (*held)[0];
  result.default_holdout = (*held)[1];
  return result;
}

}  // namespace jc::sim
