#pragma once

// Per-caller request rate limits (SPEC C6, HTTP hardening): a token bucket per caller
// name, refilled at `per_second` up to `burst`. A caller over its rate is told to come
// back (RESOURCE_EXHAUSTED; REST 429 with Retry-After) instead of crowding out others.

#include <array>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace jc::auth {

struct RateLimit {
  double per_second = 0;  // 0: no limit
  double burst = 0;
};

class RateLimiter {
 public:
  RateLimiter(RateLimit limit, const Clock* clock);
  // OK when `caller` may make one more request now; ResourceExhausted saying when it may
  // otherwise.
  absl::Status Admit(const std::string& caller);

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time refilled;
  };
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<std::string, Bucket> buckets;
  };
  RateLimit limit_;
  const Clock* clock_;
  std::array<Shard, 16> shards_;
};

}  // namespace jc::auth
