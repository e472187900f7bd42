#include "tools/sim/trace_shapes.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/sim/metrics.h"

namespace jc::sim {
namespace {

// Philly (Microsoft, Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
// Training Workloads", USENIX ATC '19). The run times are those the Alibaba PAI authors
// published beside their analysis to compare with Philly: alibaba/clusterdata,
// cluster-trace-gpu-v2020/analysis/philly_runtime.csv (commit 4453045c), one run time in
// seconds per job, sorted, about 83,100 jobs. We read the file at a handful of offsets and
// counted rows (a row's width gives the row count between offsets), so the shares below are
// good to about 0.3% of the jobs and the three quantiles to about 2%:
//   p50 1,184 s (19.7 min), p90 12,768 s (3.5 h), p99 287,333 s (80 h), longest 4,628,239 s.
// Between the knots the distribution is interpolated linearly in log(seconds).
const std::vector<DurationKnot> kPhillyKnots = {
    {0.0, 1},         {0.0029, 10},     {0.233, 100},     {0.4724, 1000}, {0.50, 1184},
    {0.8336, 5789},   {0.8830, 10000},  {0.90, 12768},    {0.9240, 20124}, {0.9481, 45163},
    {0.9845, 196655}, {0.99, 287333},   {1.0, 4628239},
};

// Alibaba PAI (Weng et al., "MLaaS in the Wild: Workload Analysis and Scheduling in
// Large-Scale Heterogeneous GPU Clusters", USENIX NSDI '22; trace cluster-trace-gpu-v2020):
// a median run time of 23 min and a 90th percentile of 4.5 h. We could not read the paper's
// text here: the two figures are as a third-party summary quotes them, citing the paper's
// PDF (usenix.org/system/files/nsdi22-paper-weng.pdf), beside "6,742 GPUs and 7.5 million
// task instances"; check them against the paper's run-time figure before leaning on them.
// No 99th percentile is quoted, so the tail is a log-normal through the two figures (sigma
// 1.92), capped at 30 days (our cap): its p99, about 120,600 s (33.5 h), is the model's,
// not a citation.
constexpr double kPaiP50 = 23 * 60;
constexpr double kPaiP90 = 4.5 * 3600;
constexpr double kPaiCap = 30 * 86400;

std::vector<DurationKnot> LogNormalKnots(double p50, double p90, double cap) {
  // Standard normal quantiles at the knots.
  static constexpr std::pair<double, double> kZ[] = {
      {0.001, -3.0902}, {0.01, -2.3263}, {0.05, -1.6449}, {0.10, -1.2816}, {0.25, -0.6745}, {0.50, 0.0},
      {0.75, 0.6745},   {0.90, 1.2816},  {0.95, 1.6449},  {0.99, 2.3263},  {0.999, 3.0902},
  };
  const double sigma = std::log(p90 / p50) / 1.2816;
  std::vector<DurationKnot> knots = {{0.0, 1}};
  for (auto [u, z] : kZ) knots.push_back({u, std::max(1.0, p50 * std::exp(sigma * z))});
  knots.push_back({1.0, cap});
  return knots;
}

std::vector<TraceShape> MakeShapes() {
  // Users: 50, of whom 5 (10%) hold 60% of the GPU time. This is our stated choice for "a
  // few heavy users", not a published figure; MeasureTrace checks the traces hold it.
  // Bursts: a mean of 6 jobs, 10 s apart (inter-arrival CV about sqrt(11) = 3.3): ours too.
  TraceShape philly;
  philly.name = "philly";
  philly.source =
      "Microsoft Philly (Jeon et al., ATC'19): run times from alibaba/clusterdata "
      "cluster-trace-gpu-v2020/analysis/philly_runtime.csv";
  philly.durations = kPhillyKnots;
  philly.p50_s = 1184;
  philly.p90_s = 12768;
  philly.p99_s = 287333;

  TraceShape pai;
  pai.name = "pai";
  pai.source =
      "Alibaba PAI 2020 (Weng et al., NSDI'22): median 23 min, p90 4.5 h as a summary of the paper "
      "quotes them; p99 from a log-normal through them";
  pai.durations = LogNormalKnots(kPaiP50, kPaiP90, kPaiCap);
  pai.p50_s = kPaiP50;
  pai.p90_s = kPaiP90;
  pai.p99_cited = false;
  pai.p99_s = DurationQuantile(pai, 0.99);
  return {philly, pai};
}

// SplitMix64: independent streams from one seed, so each aspect of a trace (durations,
// resources, bursts, users) keeps its draws when another changes.
uint64_t Stream(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

const std::vector<TraceShape>& TraceShapes() {
  static const std::vector<TraceShape> shapes = MakeShapes();
  return shapes;
}

const TraceShape* FindTraceShape(std::string_view name) {
  for (const auto& s : TraceShapes()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string TraceShapeNames() {
  std::vector<std::string> names;
  for (const auto& s : TraceShapes()) names.push_back(s.name);
  return absl::StrJoin(names, ", ");
}

double DurationQuantile(const TraceShape& shape, double u) {
  const auto& k = shape.durations;
  u = std::clamp(u, 0.0, 1.0);
  auto hi = std::lower_bound(k.begin(), k.end(), u, [](const DurationKnot& a, double v) { return a.quantile < v; });
  if (hi == k.begin()) return k.front().seconds;
  if (hi == k.end()) return k.back().seconds;
  auto lo = hi - 1;
  double f = (u - lo->quantile) / (hi->quantile - lo->quantile);
  return std::exp(std::log(lo->seconds) + f * (std::log(hi->seconds) - std::log(lo->seconds)));
}

absl::StatusOr<std::vector<TraceJob>> GenerateShapedTrace(const GeneratorOptions& o, const TraceShape& shape,
                                                          Federation& federation) {
  if (o.jobs <= 0) return absl::InvalidArgumentError("generator: jobs must be positive");
  if (!(o.load > 0)) return absl::InvalidArgumentError("generator: load must be positive");
  if (o.projects <= 0) return absl::InvalidArgumentError("generator: projects must be positive");
  if (o.diurnal_amplitude < 0 || o.diurnal_amplitude >= 1) {
    return absl::InvalidArgumentError("generator: diurnal amplitude must be in [0, 1)");
  }
  const GeneratorCapacity gpu = CapacityOf(federation);
  if (gpu.capacity <= 0) return absl::InvalidArgumentError("generator: the federation has no GPUs");

  std::uniform_real_distribution<double> unit(0, 1);
  std::mt19937_64 resources_rng(Stream(o.seed, 0));
  std::mt19937_64 durations_rng(Stream(o.seed, 1));
  std::mt19937_64 bursts_rng(Stream(o.seed, 2));
  std::mt19937_64 users_rng(Stream(o.seed, 3));
  std::mt19937_64 names_rng(Stream(o.seed, 4));
  std::vector<std::string> pool = AddDatasetPool(o, federation, resources_rng);

  // Bursts: consecutive runs of jobs, a geometric number each (a user's sweep).
  std::geometric_distribution<int> burst_size(1.0 / std::max(1.0, shape.burst_mean));
  std::vector<int> burst_of(o.jobs);
  int bursts = 0;
  for (int i = 0; i < o.jobs; ++bursts) {
    int n = 1 + burst_size(bursts_rng);
    for (int k = 0; k < n && i < o.jobs; ++k) burst_of[i++] = bursts;
  }

  // Durations from the shape. A burst that reruns a named job (recurring_share of them)
  // runs near that name's other runs: every job's duration is the shape's quantile at
  // Phi(z), with z standard normal, and the runs of one name share most of their z (a
  // Gaussian copula), so each job still follows the shape's distribution while a name's runs
  // spread by about recurring_sigma in log(seconds).
  std::vector<TraceJob> jobs(o.jobs);
  std::normal_distribution<double> job_z(0, 1), name_z(0, 1);
  auto phi = [](double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); };
  const double log_sd = std::log(shape.p90_s / shape.p50_s) / 1.2816;  // the shape's spread, as a log-normal's
  const double own = std::clamp(o.recurring_sigma / log_sd, 0.0, 1.0);  // a run's own part of its z
  const double shared = std::sqrt(1 - own * own);
  const int templates = std::max(1, shape.users * std::max(1, o.names_per_user));
  std::vector<double> template_z(templates, 0);
  std::vector<bool> template_drawn(templates, false);
  std::vector<int> template_of_burst(bursts, -1);  // -1: one-offs
  if (o.recurring_share > 0) {
    for (int b = 0; b < bursts; ++b) {
      if (unit(names_rng) < o.recurring_share) template_of_burst[b] = static_cast<int>(names_rng() % templates);
    }
  }
  for (int i = 0; i < o.jobs; ++i) {
    TraceJob& j = jobs[i];
    double z = job_z(durations_rng);
    if (int t = template_of_burst[burst_of[i]]; t >= 0) {
      if (!template_drawn[t]) {
        template_z[t] = name_z(names_rng);
        template_drawn[t] = true;
      }
      z = shared * template_z[t] + own * z;
    }
    j.duration = std::max(1.0, std::round(DurationQuantile(shape, phi(z))));
    DrawResources(o, gpu, resources_rng, j);
    DrawDataset(o, pool, federation, resources_rng, j);
  }

  // Users. What belongs to one user: a one-off burst, or every burst of a named job. The
  // heavy few take every group too big for a light user (more than twice a light user's
  // fair share: the monster jobs are theirs), then, largest group first, a group goes to them
  // when that brings their share of the GPU time nearer the stated one, else to the light
  // user with the least so far; among the heavy, to the one with the least so far. The share
  // ends within about one small group's work of the stated one, and the heavy few are the
  // top users.
  std::vector<int> group_of_burst(bursts);
  std::map<int, int> template_group;
  int groups = 0;
  for (int b = 0; b < bursts; ++b) {
    int t = template_of_burst[b];
    if (t < 0) {
      group_of_burst[b] = groups++;
    } else {
      auto [it, added] = template_group.try_emplace(t, groups);
      if (added) ++groups;
      group_of_burst[b] = it->second;
    }
  }
  std::vector<double> group_work(groups, 0);
  double all_work = 0;
  for (int i = 0; i < o.jobs; ++i) {
    group_work[group_of_burst[burst_of[i]]] += jobs[i].gpus * jobs[i].duration;
    all_work += jobs[i].gpus * jobs[i].duration;
  }
  const int users = std::max(1, shape.users);
  const int heavy = std::clamp(shape.heavy_users, 0, users);
  const double light_cap = heavy < users ? 2 * (1 - shape.heavy_share) * all_work / (users - heavy) : 0;
  std::vector<int> order(groups);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return group_work[a] > group_work[b]; });
  std::vector<double> user_work(users, 0);
  std::vector<int> user_of_group(groups, -1);
  double total = 0, heavy_work = 0;
  for (int g : order) {
    double w = group_work[g];
    if (w == 0) {  // CPU-only jobs: no GPU time to balance, anyone's
      user_of_group[g] = static_cast<int>(users_rng() % users);
      continue;
    }
    bool to_heavy = heavy == users;
    if (heavy > 0 && heavy < users) {
      double if_heavy = (heavy_work + w) / (total + w), if_light = heavy_work / (total + w);
      to_heavy = w > light_cap || std::abs(if_heavy - shape.heavy_share) < std::abs(if_light - shape.heavy_share);
    }
    auto least = [&](int from, int to) {
      return static_cast<int>(std::min_element(user_work.begin() + from, user_work.begin() + to) - user_work.begin());
    };
    int u = to_heavy ? least(0, heavy) : least(heavy, users);
    if (to_heavy) heavy_work += w;
    user_of_group[g] = u;
    user_work[u] += w;
    total += w;
  }
  std::map<std::pair<int, int>, int> name_index;  // (user, template) -> the user's job number
  std::vector<int> names_of_user(users, 0);
  int one_offs = 0;
  for (int i = 0; i < o.jobs; ++i) {
    TraceJob& j = jobs[i];
    int b = burst_of[i];
    int u = user_of_group[group_of_burst[b]];
    int p = u % o.projects;
    j.project = absl::StrCat("proj", p);
    j.user = absl::StrCat("proj", p, "-u", u);
    if (o.recurring_share > 0) {
      int t = template_of_burst[b];
      if (t >= 0) {
        auto [it, added] = name_index.try_emplace({u, t}, names_of_user[u]);
        if (added) ++names_of_user[u];
        j.name = absl::StrCat(j.user, "-job", it->second);
      } else {
        j.name = absl::StrCat(j.user, "-once", one_offs++);
      }
    }
  }

  // Arrivals: bursts start over the span that offers `load`, as a Poisson process whose rate
  // follows the day (thinning); a burst's jobs follow its start `burst_gap_s` apart on
  // average. Many short gaps and a few long ones: the burstiness the published traces show.
  double work = 0;
  for (const auto& j : jobs) work += j.gpus * j.duration;
  const double span = work / (o.load * gpu.capacity);
  std::vector<double> starts;
  starts.reserve(bursts);
  while (static_cast<int>(starts.size()) < bursts) {
    double t = unit(bursts_rng) * span;
    double rate = 1 + o.diurnal_amplitude * std::sin(2 * std::numbers::pi * t / 86400);
    if (unit(bursts_rng) * (1 + o.diurnal_amplitude) <= rate) starts.push_back(t);
  }
  std::sort(starts.begin(), starts.end());
  std::exponential_distribution<double> gap(1.0 / std::max(1e-9, shape.burst_gap_s));
  double at = 0;
  for (int i = 0; i < o.jobs; ++i) {
    at = (i == 0 || burst_of[i] != burst_of[i - 1]) ? starts[burst_of[i]] : at + gap(bursts_rng);
    jobs[i].submit = std::round(at);
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const TraceJob& a, const TraceJob& b) { return a.submit < b.submit; });
  for (auto& j : jobs) {
    if (unit(resources_rng) < o.deadline_share) {
      j.deadline = std::round(j.submit + j.duration * (1.5 + 2.5 * unit(resources_rng)));
    }
  }
  return jobs;
}

TraceShapeStats MeasureTrace(const std::vector<TraceJob>& jobs, int top_users, double capacity) {
  TraceShapeStats s;
  std::vector<double> durations;
  std::map<std::string, double> by_user;
  double work = 0;
  for (const auto& j : jobs) {
    by_user[j.user] += j.gpus * j.duration;
    if (j.gpus <= 0) continue;
    durations.push_back(j.duration);
    work += j.gpus * j.duration;
  }
  s.p50_s = Quantile(durations, 0.50);
  s.p90_s = Quantile(durations, 0.90);
  s.p99_s = Quantile(durations, 0.99);
  std::vector<double> submits;
  for (const auto& j : jobs) submits.push_back(j.submit);
  std::sort(submits.begin(), submits.end());
  if (submits.size() > 2) {
    std::vector<double> gaps;
    for (size_t i = 1; i < submits.size(); ++i) gaps.push_back(submits[i] - submits[i - 1]);
    double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
    double var = 0;
    for (double g : gaps) var += (g - mean) * (g - mean);
    var /= gaps.size();
    s.interarrival_cv = mean > 0 ? std::sqrt(var) / mean : 0;
  }
  std::vector<double> shares;
  for (const auto& [user, w] : by_user) shares.push_back(w);
  std::sort(shares.rbegin(), shares.rend());
  double top = 0;
  for (int i = 0; i < top_users && i < static_cast<int>(shares.size()); ++i) top += shares[i];
  s.top_users_share = work > 0 ? top / work : 0;
  s.users = static_cast<int>(by_user.size());
  if (capacity > 0 && submits.size() > 1 && submits.back() > submits.front()) {
    s.offered_load = work / (capacity * (submits.back() - submits.front()));
  }
  return s;
}

}  // namespace jc::sim
