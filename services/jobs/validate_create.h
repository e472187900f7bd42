#pragma once

// What a trainjob create carries by itself (Appendix A.1-2, A.1-3): names, commands,
// counts, policies. No store, no catalog: the scheduler checks specs and images after.

#include <cstddef>

#include "absl/status/status.h"
#include "jointcloud/v1/jobs.pb.h"

namespace jc::jobs {

namespace v1 = ::jointcloud::v1;

// Appendix A.1-2 / A.1-3 limits.
inline constexpr size_t kMaxJobNameLength = 31;
inline constexpr size_t kMaxTaskNameLength = 31;
inline constexpr int kMaxRetries = 10;

// Checks what a create carries by itself (names, commands, counts, policies).
absl::Status ValidateCreate(const v1::CreateTrainJobRequest& req);

}  // namespace jc::jobs
