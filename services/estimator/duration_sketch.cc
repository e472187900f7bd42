#include "services/estimator/duration_sketch.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace jc::estimator {

int DurationSketch::IndexOf(double seconds) {
  return static_cast<int>(std::floor(std::log(std::max(seconds, 1.0)) / std::log(kGrowth)));
}

double DurationSketch::ValueOf(int index) { return std::pow(kGrowth, index + 0.5); }

void DurationSketch::Add(double seconds, double decay) {
  if (!std::isfinite(seconds)) return;
  // Older runs fade; a bucket whose runs have faded to nothing is dropped.
  for (auto& bucket : weights_) bucket.second *= decay;
  weights_.erase(std::remove_if(weights_.begin(), weights_.end(),
                                [](const std::pair<int, double>& bucket) { return bucket.second < 1e-6; }),
                 weights_.end());
  AddTo(IndexOf(seconds), 1);
  // Too many buckets: the two shortest become one (short runs matter least to a queue).
  while (static_cast<int>(weights_.size()) > kMaxBuckets) {
    const double w = weights_.front().second;
    weights_.erase(weights_.begin());
    weights_.front().second += w;
  }
  ++runs_;
}

void DurationSketch::AddTo(int index, double weight) {
  auto it = std::lower_bound(weights_.begin(), weights_.end(), index,
                             [](const std::pair<int, double>& bucket, int i) { return bucket.first < i; });
  if (it == weights_.end() || it->first != index) it = weights_.insert(it, {index, 0.0});
  it->second += weight;
}

double DurationSketch::Quantile(double q) const {
  if (weights_.empty()) return 0;
  double total = 0;
  for (const auto& [index, weight] : weights_) total += weight;
  const double target = std::clamp(q, 0.0, 1.0) * total;
  double seen = 0;
  for (const auto& [index, weight] : weights_) {
    seen += weight;
    if (seen >= target) return ValueOf(index);
  }
  return ValueOf(weights_.back().first);
}

std::string DurationSketch::Encode() const {
  std::string out = absl::StrCat(runs_, ";");
  bool first = true;
  for (const auto& [index, weight] : weights_) {
    absl::StrAppend(&out, first ? "" : ",", index, ":", weight);
    first = false;
  }
  return out;
}

absl::StatusOr<DurationSketch> DurationSketch::Decode(const std::string& text) {
  std::pair<std::string, std::string> parts = absl::StrSplit(text, absl::MaxSplits(';', 1));
  DurationSketch s;
  if (!absl::SimpleAtoi(parts.first, &s.runs_) || s.runs_ < 0) {
    return absl::InvalidArgumentError(absl::StrCat("duration sketch \"", text.substr(0, 64), "\": no run count"));
  }
  for (absl::string_view bucket : absl::StrSplit(parts.second, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(bucket, absl::MaxSplits(':', 1));
    int index = 0;
    double weight = 0;
    if (!absl::SimpleAtoi(kv.first, &index) || !absl::SimpleAtod(kv.second, &weight) || !std::isfinite(weight) ||
        weight < 0 || index < 0 || index > 400) {
      return absl::InvalidArgumentError(absl::StrCat("duration sketch: bad bucket \"", bucket, "\""));
    }
    s.AddTo(index, weight);
  }
  if (static_cast<int>(s.weights_.size()) > kMaxBuckets) {
    return absl::InvalidArgumentError("duration sketch: more buckets than a sketch keeps");
  }
  return s;
}

}  // namespace jc::estimator
