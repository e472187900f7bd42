// Issue 44, hole 4: what a center reports of an attempt is billed only within what the
// control plane saw itself; what it claims past that is kept, unbilled.

#include "services/jobs/usage_bounds.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

namespace {

using jc::jobs::BoundByObservation;
using jc::jobs::ObservedAttempt;

const absl::Time kSubmit = absl::FromUnixSeconds(1'800'000'000);

ObservedAttempt TenMinutes() {
  ObservedAttempt o;
  o.submitted = kSubmit;
  o.seen_ended = kSubmit + absl::Minutes(10);
  o.cpus = 4;
  o.gpus = 1;
  o.memory_mb = 8192;
  return o;
}

}  // namespace

TEST_CASE("an honest report is billed as reported, with no claim [A7]", "[A7]") {
  jointcloud::adapter::v1::ReplicaUsage used;
  used.set_wall_seconds(540);
  used.set_cpu_seconds(1000);
  used.set_memory_peak_mb(4000);
  used.set_read_bytes(1 << 20);
  auto b = BoundByObservation(kSubmit + absl::Seconds(30), kSubmit + absl::Seconds(570), used, TenMinutes());
  CHECK(b.wall_seconds == 540);
  CHECK(b.cpu_seconds == 1000);
  CHECK(b.gpus == 1);
  CHECK(b.gpu_seconds == 540);
  CHECK(b.memory_peak_mb == 4000);
  CHECK(b.read_bytes == (1 << 20));
  CHECK_FALSE(b.claim.has_value());
}

TEST_CASE("a rogue center's figures are bounded by what the control plane saw and its claim kept [A7][C6]",
          "[A7][C6]") {
  jointcloud::adapter::v1::ReplicaUsage used;
  SECTION("not a number, infinite or negative: counted as nothing, never stored as NaN") {
    used.set_wall_seconds(std::numeric_limits<double>::quiet_NaN());
    used.set_cpu_seconds(std::numeric_limits<double>::quiet_NaN());
    used.set_gpu_seconds(std::numeric_limits<double>::infinity());
    used.set_memory_peak_mb(-5);
    used.set_read_bytes(-1);
    used.set_gpus(-3);
    auto b = BoundByObservation(kSubmit, kSubmit + absl::Minutes(5), used, TenMinutes());
    for (double v : {b.wall_seconds, b.cpu_seconds, b.gpu_seconds}) {
      CHECK(std::isfinite(v));
      CHECK(v >= 0);
    }
    CHECK(b.wall_seconds == 300);
    CHECK(b.memory_peak_mb == 0);
    CHECK(b.read_bytes == 0);
    CHECK(b.gpus == 1);
    REQUIRE(b.claim.has_value());
    CHECK_THAT(b.claim->bounded(), Catch::Contains("is not a measurement"));
  }
  SECTION("IO and memory past any machine's: bounded") {
    used.set_wall_seconds(60);
    used.set_read_bytes(std::numeric_limits<int64_t>::max());
    used.set_write_bytes(std::numeric_limits<int64_t>::max());
    used.set_memory_peak_mb(std::numeric_limits<int64_t>::max());
    auto b = BoundByObservation(kSubmit, kSubmit + absl::Minutes(1), used, TenMinutes());
    CHECK(static_cast<double>(b.read_bytes) <= jc::jobs::kMaxBytesPerSecond * 60);
    CHECK(static_cast<double>(b.write_bytes) <= jc::jobs::kMaxBytesPerSecond * 60);
    CHECK(b.memory_peak_mb == 8192);
    REQUIRE(b.claim.has_value());
  }
  SECTION("a long wall time in a short span (to bill a whole run at a price raised at its end): the span") {
    used.set_wall_seconds(36000);
    auto b = BoundByObservation(kSubmit + absl::Minutes(9), kSubmit + absl::Minutes(9) + absl::Seconds(30), used,
                                TenMinutes());
    CHECK(b.wall_seconds <= 31);
    REQUIRE(b.claim.has_value());
    CHECK(b.claim->wall_seconds() == 36000);
  }
  SECTION("times before the submit or after the end was seen: within them") {
    auto b = BoundByObservation(kSubmit - absl::Hours(1000), kSubmit + absl::Hours(1000), used, TenMinutes());
    CHECK(b.started == kSubmit);
    CHECK(b.ended == kSubmit + absl::Minutes(10));
    CHECK(b.wall_seconds == 600);
    REQUIRE(b.claim.has_value());
  }
}
