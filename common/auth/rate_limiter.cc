#include "common/auth/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"

namespace jc::auth {
namespace {

constexpr size_t kMaxBucketsPerShard = 10000;  // callers seen; a full shard starts over

}  // namespace

RateLimiter::RateLimiter(RateLimit limit, const Clock* clock) : limit_(limit), clock_(clock) {}

absl::Status RateLimiter::Admit(const std::string& caller) {
  if (limit_.per_second <= 0) return absl::OkStatus();
  Shard& shard = shards_[std::hash<std::string>()(caller) % shards_.size()];
  absl::Time now = clock_->Now();
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.buckets.find(caller);
  if (it == shard.buckets.end()) {
    if (shard.buckets.size() >= kMaxBucketsPerShard) shard.buckets.clear();
    it = shard.buckets.emplace(caller, Bucket{limit_.burst, now}).first;
  }
  Bucket& b = it->second;
  double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - b.refilled));
  b.tokens = std::min(limit_.burst, b.tokens + elapsed * limit_.per_second);
  b.refilled = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return absl::OkStatus();
  }
  double wait = (1 - b.tokens) / limit_.per_second;
  return absl::ResourceExhaustedError(absl::StrCat("rate limit: ", caller, " may make ", limit_.per_second,
                                                   " requests per second (bursts of ", limit_.burst,
                                                   "); retry in ", std::ceil(wait * 1000) / 1000, " s"));
}

}  // namespace jc::auth
