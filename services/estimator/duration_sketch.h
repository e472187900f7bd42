#pragma once

// A bounded summary of one key's run times (SPEC A16): counts in logarithmic buckets, each
// `kGrowth` wider than the one before (every quantile within ±5% of a true run time), at
// most `kMaxBuckets` of them (the shortest merged first, as DDSketch collapses), and older
// runs weighing less than newer ones (each new run multiplies the weight of those before by
// `decay`), so a job that got faster is believed within a few dozen runs. Durations are
// "reference seconds": wall seconds × the performance factor of the center that ran them.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace jc::estimator {

class DurationSketch {
 public:
  static constexpr double kGrowth = 1.1;
  static constexpr int kMaxBuckets = 128;  // a spread of 1.1^128 ≈ 200,000: 10 s to 3 weeks

  // Records one run of `seconds` (clamped to at least 1 s).
  void Add(double seconds, double decay);
  // The run time below which `q` (0..1) of the weight lies; 0 when empty.
  double Quantile(double q) const;
  int64_t runs() const { return runs_; }
  bool empty() const { return runs_ == 0; }

  // A compact text form for the store ("runs;index:weight,..."), and back.
  std::string Encode() const;
  static absl::StatusOr<DurationSketch> Decode(const std::string& text);

 private:
  static int IndexOf(double seconds);
  void AddTo(int index, double weight);  // to the bucket, made where there is none
  static double ValueOf(int index);  // the bucket's representative (its geometric middle)

  // Bucket index -> weight, in index order: contiguous, since every run walks them all.
  std::vector<std::pair<int, double>> weights_;
  int64_t runs_ = 0;
};

}  // namespace jc::estimator
