#include <algorithm>
#include <cmath>

#include "services/scheduler/scoring/scorer.h"

namespace jc::scheduler {

void NormalizeScores(absl::Span<const double> raw, bool higher_is_better, absl::Span<int> scores) {
  if (raw.empty()) return;
  auto [lo_it, hi_it] = std::minmax_element(raw.begin(), raw.end());
  double lo = *lo_it, hi = *hi_it;
  double span = hi - lo;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (!(span > 0)) {  // also catches NaN
      scores[i] = 100;
      continue;
    }
    double frac = higher_is_better ? (raw[i] - lo) / span : (hi - raw[i]) / span;
    scores[i] = static_cast<int>(100.0 * frac + 0.5);  // frac is in 0..1: round half up
  }
}

}  // namespace jc::scheduler
