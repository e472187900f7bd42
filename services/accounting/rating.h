#pragma once

// Rating: what an attempt that ran costs and the energy it drew (formula 1), from what it
// is billed for (its run, bounded by what the control plane saw: services/jobs/
// usage_bounds.h) and its spec's terms at its center. Pure: no clock, no store, no
// scheduler; the job manager resolves the terms from its in-memory view and asks here.
// Golden cases: tests/unit/accounting/rating_test.cc.

#include "jointcloud/v1/accounting.pb.h"

namespace jc::accounting {

namespace v1 = ::jointcloud::v1;

// The spec's terms at the center for one attempt.
struct Terms {
  double price_per_hour = 0;         // of one replica, in force when the attempt was submitted
  double execution_power_watts = 0;  // P_exe while a replica of the spec runs
  double static_power_watts = 0;     // the center's P_static, drawn while its data came in
};

struct Rated {
  double price_per_hour = 0;
  double cost = 0;        // price × billed hours
  double energy_kwh = 0;  // (P_static × transfer + P_exe × run) in kWh
};

// `wall_seconds`: the run billed; `transfer_seconds`: its data and image coming in before
// its submit. Negative or NaN figures count as none.
Rated Rate(const Terms& terms, double wall_seconds, double transfer_seconds);

// A correction record (a center's report after the control plane's estimate) carries the
// difference, so that the two records sum to the center's figures: `record` less `estimate`,
// field by field (wall, CPU, IO, GPU-seconds, energy, cost).
void SubtractEstimate(v1::UsageRecord& record, const v1::UsageRecord& estimate);

}  // namespace jc::accounting
