#include "tools/sim/generator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "tools/sim/trace_shapes.h"

namespace jc::sim {

GeneratorCapacity CapacityOf(const Federation& federation) {
  GeneratorCapacity c;
  for (const auto& center : federation.centers) {
    c.capacity += center.gpus * federation.PerformanceOf(center);
    c.largest = std::max(c.largest, center.gpus);
    if (center.gpus > 0 && std::find(c.models.begin(), c.models.end(), center.gpu_model) == c.models.end()) {
      c.models.push_back(center.gpu_model);
    }
  }
  return c;
}

std::vector<std::string> AddDatasetPool(const GeneratorOptions& o, Federation& federation, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<std::string> pool;
  if (o.dataset_share > 0 && o.datasets > 0) {
    for (int d = 0; d < o.datasets; ++d) {
      SimDataset ds;
      ds.key = absl::StrCat("ds", d, ":1");
      ds.size_mb = std::round(1024 * std::pow(500.0, unit(rng)));  // 1 GB .. 500 GB, log-uniform
      federation.datasets[ds.key] = ds;
      int copies = 1 + static_cast<int>(rng() % 2);
      for (int k = 0; k < copies; ++k) {
        auto& holder = federation.centers[rng() % federation.centers.size()].datasets;
        if (std::find(holder.begin(), holder.end(), ds.key) == holder.end()) holder.push_back(ds.key);
      }
      pool.push_back(ds.key);
    }
  }
  return pool;
}

void DrawResources(const GeneratorOptions& o, const GeneratorCapacity& c, std::mt19937_64& rng, TraceJob& j) {
  std::uniform_real_distribution<double> unit(0, 1);
  // GPU counts: powers of two, most jobs on one GPU (Philly's and PAI's shape).
  static constexpr double kGpuCounts[] = {1, 2, 4, 8, 16, 32};
  static constexpr double kGpuWeights[] = {0.60, 0.10, 0.12, 0.12, 0.04, 0.02};
  std::discrete_distribution<int> gpus(std::begin(kGpuWeights), std::end(kGpuWeights));
  if (unit(rng) < o.cpu_only_share) {
    j.cpus = std::pow(2, 2 + static_cast<int>(rng() % 4));
    j.memory_mb = j.cpus * 4096;
  } else {
    j.gpus = std::min(kGpuCounts[gpus(rng)], c.largest);
    j.cpus = j.gpus * 6;
    j.memory_mb = j.gpus * 48 * 1024;
    if (!c.models.empty() && unit(rng) < o.constrained_share) j.gpu_model = c.models[rng() % c.models.size()];
  }
}

void DrawDataset(const GeneratorOptions& o, const std::vector<std::string>& pool, const Federation& federation,
                 std::mt19937_64& rng, TraceJob& j) {
  std::uniform_real_distribution<double> unit(0, 1);
  if (!pool.empty() && unit(rng) < o.dataset_share) {
    j.dataset = pool[rng() % pool.size()];
    j.dataset_mb = federation.datasets.at(j.dataset).size_mb;
  }
}

absl::StatusOr<std::vector<TraceJob>> GenerateTrace(const GeneratorOptions& o, Federation& federation) {
  if (!o.shape.empty()) {
    const TraceShape* shape = FindTraceShape(o.shape);
    if (shape == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("generator: unknown trace shape \"", o.shape, "\" (valid: ", TraceShapeNames(), ")"));
    }
    return GenerateShapedTrace(o, *shape, federation);
  }
  if (o.jobs <= 0) return absl::InvalidArgumentError("generator: jobs must be positive");
  if (!(o.load > 0)) return absl::InvalidArgumentError("generator: load must be positive");
  if (o.projects <= 0) return absl::InvalidArgumentError("generator: projects must be positive");
  if (!(o.median_duration_s > 0) || !(o.duration_sigma >= 0)) {
    return absl::InvalidArgumentError("generator: the duration median must be positive and sigma not negative");
  }
  if (o.diurnal_amplitude < 0 || o.diurnal_amplitude >= 1) {
    return absl::InvalidArgumentError("generator: diurnal amplitude must be in [0, 1)");
  }
  const GeneratorCapacity gpu = CapacityOf(federation);
  const double capacity = gpu.capacity;  // reference-GPU seconds per second
  if (capacity <= 0) return absl::InvalidArgumentError("generator: the federation has no GPUs");

  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::lognormal_distribution<double> duration(std::log(o.median_duration_s), o.duration_sigma);

  // Datasets: a pool, each at one or two centers.
  std::vector<std::string> pool = AddDatasetPool(o, federation, rng);

  // Projects: weights 1/k (a few heavy, many light).
  std::vector<double> project_weight;
  for (int p = 0; p < o.projects; ++p) project_weight.push_back(1.0 / (p + 1));
  std::discrete_distribution<int> project(project_weight.begin(), project_weight.end());

  // Recurring jobs draw from a stream of their own, so a trace without them is the one this
  // seed always made.
  std::mt19937_64 names_rng(o.seed ^ 0x6a6f626e616d6573ULL);
  std::map<std::string, double> name_median;  // "user/jobN" -> its median duration
  std::lognormal_distribution<double> spread(0, o.recurring_sigma);
  int one_offs = 0;

  std::vector<TraceJob> jobs(o.jobs);
  double work = 0;
  for (auto& j : jobs) {
    j.duration = std::round(std::clamp(duration(rng), 30.0, std::max(30.0, o.max_duration_s)));
    DrawResources(o, gpu, rng, j);
    int p = project(rng);
    j.project = absl::StrCat("proj", p);
    j.user = absl::StrCat("proj", p, "-u", rng() % 3);
    if (o.recurring_share > 0) {
      if (unit(names_rng) < o.recurring_share) {
        j.name = absl::StrCat(j.user, "-job", names_rng() % std::max(1, o.names_per_user));
        auto [it, added] = name_median.try_emplace(j.name, duration(names_rng));
        j.duration = std::round(std::clamp(it->second * spread(names_rng), 30.0, std::max(30.0, o.max_duration_s)));
      } else {
        j.name = absl::StrCat(j.user, "-once", one_offs++);
      }
    }
    DrawDataset(o, pool, federation, rng, j);
  }
  for (const auto& j : jobs) work += j.gpus * j.duration;  // (cpu-only jobs count 0 GPUs)
  // Arrivals over the span that offers `load`: a Poisson process whose rate follows the
  // day (thinning), so the count is exact and the shape diurnal.
  double span = work / (o.load * capacity);
  std::vector<double> times;
  times.reserve(o.jobs);
  while (static_cast<int>(times.size()) < o.jobs) {
    double t = unit(rng) * span;
    double rate = 1 + o.diurnal_amplitude * std::sin(2 * std::numbers::pi * t / 86400);
    if (unit(rng) * (1 + o.diurnal_amplitude) <= rate) times.push_back(std::round(t));
  }
  std::sort(times.begin(), times.end());
  for (int i = 0; i < o.jobs; ++i) {
    jobs[i].submit = times[i];
    if (unit(rng) < o.deadline_share) jobs[i].deadline = std::round(times[i] + jobs[i].duration * (1.5 + 2.5 * unit(rng)));
  }
  return jobs;
}

}  // namespace jc::sim
