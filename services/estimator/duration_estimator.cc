#include "services/estimator/duration_estimator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace jc::estimator {
namespace {

// The four keys of a job, most specific first, with how the plan names each. The parts are
// joined by a character no id or digest holds, so no two classes share a key.
struct Level {
  std::string key;
  const char* says;
};

std::vector<Level> LevelsOf(const JobClass& j) {
  const std::string sep = "\x1f";
  return {
      {absl::StrCat("c", sep, j.project, sep, j.user, sep, j.name, sep, j.command_digest, sep, j.spec),
       "this command of this name by this user"},
      {absl::StrCat("n", sep, j.project, sep, j.user, sep, j.name, sep, j.spec), "this name by this user"},
      {absl::StrCat("p", sep, j.project, sep, j.name, sep, j.spec), "this name in this project"},
      {absl::StrCat("u", sep, j.project, sep, j.user, sep, j.spec), "this user's jobs of this spec"},
  };
}

absl::Duration AtCenter(double reference_seconds, double performance) {
  return absl::Seconds(reference_seconds / (performance > 0 ? performance : 1.0));
}

}  // namespace

std::string DescribeDuration(absl::Duration d) {
  const double s = absl::ToDoubleSeconds(d);
  if (s < 90) return absl::StrFormat("%.0f s", s);
  if (s < 90 * 60) return absl::StrFormat("%.0f min", s / 60);
  if (s < 48 * 3600) return absl::StrFormat("%.1f h", s / 3600);
  return absl::StrFormat("%.1f d", s / 86400);
}

DurationEstimator::DurationEstimator(EstimatorOptions options) : options_(options) {}

void DurationEstimator::ObserveKey(const std::string& key, double reference_seconds) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    lru_.push_front({key, DurationSketch()});
    it = index_.emplace(key, lru_.begin()).first;
    while (static_cast<int64_t>(index_.size()) > options_.max_keys) {
      index_.erase(lru_.back().key);
      lru_.pop_back();
    }
  } else {
    lru_.splice(lru_.begin(), lru_, it->second);
  }
  it->second->sketch.Add(reference_seconds, options_.decay);
}

void DurationEstimator::Observe(const JobClass& job, absl::Duration wall, double performance) {
  const double seconds = absl::ToDoubleSeconds(wall);
  if (!std::isfinite(seconds) || seconds <= 0) return;
  const double reference = seconds * (performance > 0 && std::isfinite(performance) ? performance : 1.0);
  for (const Level& level : LevelsOf(job)) ObserveKey(level.key, reference);
}

std::optional<DurationEstimate> DurationEstimator::Estimate(const JobClass& job, double performance,
                                                            std::optional<absl::Duration> estimated,
                                                            std::optional<absl::Duration> time_limit) const {
  for (const Level& level : LevelsOf(job)) {
    auto it = index_.find(level.key);
    if (it == index_.end() || it->second->sketch.runs() < options_.min_runs) continue;
    const DurationSketch& sketch = it->second->sketch;
    DurationEstimate e;
    e.median = AtCenter(sketch.Quantile(0.5), performance);
    e.p90 = AtCenter(sketch.Quantile(0.9), performance);
    e.runs = sketch.runs();
    e.basis = absl::StrCat("median of ", e.runs, " runs of ", level.says, ": ", DescribeDuration(e.median));
    return e;
  }
  if (estimated && *estimated > absl::ZeroDuration()) {
    return DurationEstimate{*estimated, *estimated, 0, absl::StrCat("the job's own estimate: ", DescribeDuration(*estimated))};
  }
  if (time_limit && *time_limit > absl::ZeroDuration()) {
    return DurationEstimate{*time_limit, *time_limit, 0,
                            absl::StrCat("its time limit (an upper bound): ", DescribeDuration(*time_limit))};
  }
  return std::nullopt;
}

std::vector<DurationEstimator::Row> DurationEstimator::Export() const {
  std::vector<Row> rows;
  rows.reserve(lru_.size());
  for (const Entry& e : lru_) rows.push_back({e.key, e.sketch.Encode()});
  return rows;
}

absl::Status DurationEstimator::Import(const std::vector<Row>& rows) {
  // Rows come most recent first (as Export writes them); loaded so they keep that order.
  for (auto row = rows.rbegin(); row != rows.rend(); ++row) {
    auto sketch = DurationSketch::Decode(row->sketch);
    if (!sketch.ok()) return sketch.status();
    auto it = index_.find(row->key);
    if (it != index_.end()) {
      lru_.erase(it->second);
      index_.erase(it);
    }
    lru_.push_front({row->key, std::move(*sketch)});
    index_[row->key] = lru_.begin();
    while (static_cast<int64_t>(index_.size()) > options_.max_keys) {
      index_.erase(lru_.back().key);
      lru_.pop_back();
    }
  }
  return absl::OkStatus();
}

}  // namespace jc::estimator
