// The native adapter's reading of what nexec's master sends (SPEC A16): the master is
// another process and its timestamps any int64 (attacker's review, session 29, F8): a start
// past 2262 overflowed int64 nanoseconds on the way to a queue report's wait.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "adapters/native/nexec_backend.h"

namespace {

google::protobuf::Timestamp At(int64_t seconds, int32_t nanos = 0) {
  google::protobuf::Timestamp t;
  t.set_seconds(seconds);
  t.set_nanos(nanos);
  return t;
}

}  // namespace

TEST_CASE("a start estimate's wait saturates: a start past 2262, int64's extremes and a start already due give a "
          "wait within 0 and 366 days [A16][C6]",
          "[A16][C6]") {
  using jc::adapter::kMaxStartWaitSeconds;
  using jc::adapter::StartWaitSeconds;
  const int64_t now = 1800000000;  // 2027
  CHECK(StartWaitSeconds(At(now), At(now + 90, 500000000)) == Approx(90.5));
  CHECK(StartWaitSeconds(At(now), At(now)) == 0);
  CHECK(StartWaitSeconds(At(now), At(now - 3600)) == 0);  // already due: at once
  // Year 3000, past where int64 nanoseconds end (2262): the longest wait, not a negative one.
  CHECK(StartWaitSeconds(At(now), At(32503680000)) == kMaxStartWaitSeconds);
  const int64_t most = std::numeric_limits<int64_t>::max(), least = std::numeric_limits<int64_t>::min();
  CHECK(StartWaitSeconds(At(now), At(most, 999999999)) == kMaxStartWaitSeconds);
  CHECK(StartWaitSeconds(At(least), At(most)) == kMaxStartWaitSeconds);
  CHECK(StartWaitSeconds(At(most), At(least)) == 0);
  CHECK(StartWaitSeconds(At(now), At(now, -2000000000)) == 0);  // nanos out of range: still a number
  // Times of jobs: any int64 of seconds is a time, never a wrapped one.
  CHECK(jc::adapter::TimeOf(At(32503680000)) > absl::FromUnixSeconds(now));
  CHECK(jc::adapter::TimeOf(At(most, 999999999)) > absl::FromUnixSeconds(now));
  CHECK(jc::adapter::TimeOf(At(least)) < absl::FromUnixSeconds(0));
  CHECK(jc::adapter::TimeOf(At(now, 250000000)) == absl::FromUnixSeconds(now) + absl::Milliseconds(250));
}
