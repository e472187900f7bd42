#pragma once

// The usage record of one attempt that ended (issue 31, SPEC A7/A12): what its center
// measured, bounded by what the control plane saw itself (usage_bounds.h), priced at the
// price in force when the control plane sent the attempt (a later change does not reprice
// it), with its energy (formula 1). A correction of an earlier estimate carries the
// difference, so the two sum to the center's figures. Pure: the job manager gives it the
// catalog's terms for the attempt's spec at its center.

#include <optional>

#include "absl/time/time.h"
#include "jointcloud/v1/accounting.pb.h"
#include "services/jobs/job_state.h"
#include "services/scheduler/snapshot.h"

namespace jc::jobs {

// What the catalog says of the attempt's spec at its center.
struct UsageTerms {
  std::optional<scheduler::SpecAtCenter> offer;  // none: the center no longer offers it (unpriced)
  double static_power_watts = 0;                 // the center's (formula 1)
};

// The record's id is the attempt's ("job/task/replica/attempt"; a correction's ends "/c1").
v1::UsageRecord MeteredUsageRecord(const v1::JobRecord& record, const MeteredAttempt& metered, absl::Time now,
                                   const UsageTerms& terms);

}  // namespace jc::jobs
