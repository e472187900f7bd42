#include "services/estimator/duration_estimator.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace jc::estimator {
namespace {

// The five keys of a job, most specific first, with how the plan names each. The parts are
// joined by a character no id or digest holds, so no two classes share a key.
struct Level {
  std::string key;
  const char* says;
  bool one_off = false;  // none of the job's own name or command: assumed cautiously
};

std::vector<Level> LevelsOf(const JobClass& j) {
  const std::string sep = "\x1f";
  return {
      {absl::StrCat("c", sep, j.project, sep, j.user, sep, j.name, sep, j.command_digest, sep, j.spec),
       "this command of this name by this user"},
      {absl::StrCat("n", sep, j.project, sep, j.user, sep, j.name, sep, j.spec), "this name by this user"},
      {absl::StrCat("p", sep, j.project, sep, j.name, sep, j.spec), "this name in this project"},
      // A command's runs at another size say more of its length than the user's other jobs
      // do (measured: where jobs wait, `sef` gained 21-35% with it against 17-28% without;
      // a rerun's spec is often not its last run's). With the command: another task of the
      // job (its eval beside its train) is another program.
      {absl::StrCat("a", sep, j.project, sep, j.user, sep, j.name, sep, j.command_digest),
       "this command of this name by this user, any spec"},
      {absl::StrCat("u", sep, j.project, sep, j.user, sep, j.spec), "this user's jobs of this spec", true},
  };
}

// The project a key is of: its second part (every level starts with the project).
std::string ProjectOfKey(const std::string& key) {
  const size_t start = key.find('\x1f');
  if (start == std::string::npos) return "";
  const size_t end = key.find('\x1f', start + 1);
  return key.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
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

int64_t DurationEstimator::ProjectBound() const {
  if (options_.max_keys_per_project > 0) return options_.max_keys_per_project;
  // A job writes five keys at once: a project always holds at least one job's.
  return std::max<int64_t>({options_.max_keys / 4, std::min<int64_t>(options_.max_keys, 1024), 5});
}

int64_t DurationEstimator::project_keys(const std::string& project) const {
  auto it = projects_.find(project);
  return it == projects_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

void DurationEstimator::Evict(Lru::iterator it, std::vector<std::string>* evicted) {
  auto project = projects_.find(it->project);
  project->second.erase(it->in_project);
  if (project->second.empty()) projects_.erase(project);
  index_.erase(it->key);
  if (evicted != nullptr) evicted->push_back(std::move(it->key));
  lru_.erase(it);
}

DurationEstimator::Lru::iterator DurationEstimator::Touch(const std::string& key, std::vector<std::string>* evicted) {
  auto found = index_.find(key);
  if (found != index_.end()) {
    Lru::iterator it = found->second;
    lru_.splice(lru_.begin(), lru_, it);
    auto& order = projects_[it->project];
    order.splice(order.begin(), order, it->in_project);
    return it;
  }
  lru_.push_front({key, ProjectOfKey(key), DurationSketch(), {}});
  Lru::iterator it = lru_.begin();
  index_.emplace(key, it);
  auto& order = projects_[it->project];
  order.push_front(it);
  it->in_project = order.begin();
  // The project's own least recently observed first, then the federation's.
  while (static_cast<int64_t>(order.size()) > ProjectBound()) Evict(order.back(), evicted);
  while (static_cast<int64_t>(index_.size()) > options_.max_keys) Evict(std::prev(lru_.end()), evicted);
  return it;
}

std::vector<DurationEstimator::Row> DurationEstimator::Observe(const JobClass& job, absl::Duration wall,
                                                               double performance) {
  std::vector<Row> changed;
  Record(job, wall, performance, &changed);
  return changed;
}

void DurationEstimator::Record(const JobClass& job, absl::Duration wall, double performance,
                               std::vector<Row>* changed) {
  const double seconds = absl::ToDoubleSeconds(wall);
  if (!std::isfinite(seconds) || seconds <= 0) return;
  // At most a year at the fastest center there could be: whatever a center said, a sketch
  // stays within its buckets and every estimate within what a duration can hold.
  constexpr double kMaxReferenceSeconds = 366.0 * 86400 * 1000;
  const double reference =
      std::min(kMaxReferenceSeconds, seconds * (performance > 0 && std::isfinite(performance) ? performance : 1.0));
  std::vector<std::string> evicted;
  for (const Level& level : LevelsOf(job)) {
    Lru::iterator e = Touch(level.key, &evicted);
    e->sketch.Add(reference, options_.decay);
    if (changed != nullptr) changed->push_back({e->key, e->sketch.Encode()});
  }
  if (changed == nullptr) return;
  // A job's own keys are its project's most recent: never among those evicted.
  for (std::string& key : evicted) changed->push_back({std::move(key), ""});
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
    e.assumed = level.one_off ? AtCenter(std::sqrt(sketch.Quantile(0.5) * sketch.Quantile(0.9)), performance) : e.median;
    e.basis = absl::StrCat("median of ", e.runs, " runs of ", level.says, ": ", DescribeDuration(e.median));
    if (level.one_off) absl::StrAppend(&e.basis, " (a one-off: assumed ", DescribeDuration(e.assumed), ")");
    return e;
  }
  if (estimated && *estimated > absl::ZeroDuration()) {
    return DurationEstimate{*estimated, *estimated, 0,
                            absl::StrCat("the job's own estimate: ", DescribeDuration(*estimated)), *estimated};
  }
  if (time_limit && *time_limit > absl::ZeroDuration()) {
    return DurationEstimate{*time_limit, *time_limit, 0,
                            absl::StrCat("its time limit (an upper bound): ", DescribeDuration(*time_limit)), *time_limit};
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
    // A row that does not read (written by a future version, or damaged) costs that key's
    // history, not the whole estimator: a job manager must still lead.
    if (!sketch.ok()) {
      ++skipped_;
      continue;
    }
    // The bounds hold as when observed: a project's rows past its share are its oldest.
    Touch(row->key, nullptr)->sketch = std::move(*sketch);
  }
  return absl::OkStatus();
}

}  // namespace jc::estimator
