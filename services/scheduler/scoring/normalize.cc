#include <algorithm>
#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "services/scheduler/scoring/scorer.h"

namespace jc::scheduler {

void NormalizeScores(absl::Span<const double> raw, bool higher_is_better, absl::Span<int> scores) {
  if (raw.empty()) return;
  auto [lo_it, hi_it] = std::minmax_element(raw.begin(), raw.end());
  const double lo = *lo_it, hi = *hi_it;
  const double span = hi - lo;
  const size_t n = raw.size();
  if (!(span > 0)) {  // also catches NaN
    std::fill(scores.begin(), scores.begin() + n, 100);
    return;
  }
  // frac is in 0..1: round half up. Two candidates at a time where SSE2 is there (every
  // x86-64): the same IEEE operations per lane as the scalar loop, so the same scores,
  // at half the divisions' cost (the decision benchmark's largest share).
  const double base = higher_is_better ? lo : hi;
  const double sign = higher_is_better ? 1.0 : -1.0;  // exact: x - lo, or -(x - hi) = hi - x
  size_t i = 0;
#if defined(__SSE2__)
  const __m128d vbase = _mm_set1_pd(base), vsign = _mm_set1_pd(sign), vspan = _mm_set1_pd(span);
  const __m128d v100 = _mm_set1_pd(100.0), vhalf = _mm_set1_pd(0.5);
  for (; i + 2 <= n; i += 2) {
    __m128d d = _mm_mul_pd(_mm_sub_pd(_mm_loadu_pd(&raw[i]), vbase), vsign);
    __m128d r = _mm_add_pd(_mm_mul_pd(v100, _mm_div_pd(d, vspan)), vhalf);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(&scores[i]), _mm_cvttpd_epi32(r));
  }
#endif
  for (; i < n; ++i) scores[i] = static_cast<int>(100.0 * (((raw[i] - base) * sign) / span) + 0.5);
}

}  // namespace jc::scheduler
