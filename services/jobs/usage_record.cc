#include "services/jobs/usage_record.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/timestamp.h"
#include "services/accounting/rating.h"
#include "services/accounting/usage_book.h"
#include "services/jobs/usage_bounds.h"

namespace jc::jobs {

v1::UsageRecord MeteredUsageRecord(const v1::JobRecord& r, const MeteredAttempt& m, absl::Time now,
                                   const UsageTerms& terms) {
  const v1::ReplicaRecord& rep = r.replicas(m.index);
  const v1::AttemptRecord& a = m.attempt;
  const std::string& spec = r.request().tasks(rep.task_index()).resource_spec_id();
  v1::UsageRecord u;
  const std::string id = absl::StrCat(r.job_id(), "/", rep.task_index(), "/", rep.replica_index(), "/", a.attempt());
  u.set_record_id(m.correction ? absl::StrCat(id, "/c1") : id);
  if (m.correction) u.set_corrects(id);
  u.set_job_id(r.job_id());
  u.set_task_index(rep.task_index());
  u.set_replica_index(rep.replica_index());
  u.set_attempt(a.attempt());
  u.set_project(r.request().project());
  u.set_user_name(r.request().user_name());
  u.set_ai_center_id(a.center_id());
  u.set_resource_spec_id(spec);
  u.set_outcome(a.outcome());
  const apb::ReplicaUsage& used = m.usage;
  const std::optional<scheduler::SpecAtCenter>& offer = terms.offer;
  // The center's figures within what the control plane saw itself (usage_bounds.h).
  ObservedAttempt observed;
  if (a.has_submitted_at()) observed.submitted = FromTimestamp(a.submitted_at());
  else if (a.has_placed_at()) observed.submitted = FromTimestamp(a.placed_at());
  observed.seen_ended = a.has_seen_ended_at() ? FromTimestamp(a.seen_ended_at()) : now;
  if (offer.has_value()) {
    observed.cpus = offer->quantity.cpu;
    observed.gpus = static_cast<int>(offer->quantity.gpu);
    observed.memory_mb = static_cast<int64_t>(offer->quantity.memory_mb);
  }
  const BilledUsage billed =
      BoundByObservation(FromTimestamp(a.started_at()), FromTimestamp(a.ended_at()), used, observed);
  const absl::Time start = billed.started;
  const double wall = billed.wall_seconds;
  *u.mutable_started_at() = ToTimestamp(start);
  *u.mutable_ended_at() = ToTimestamp(billed.ended);
  *u.mutable_recorded_at() = ToTimestamp(now);
  u.set_wall_seconds(wall);
  u.set_cpu_seconds(billed.cpu_seconds);
  u.set_memory_peak_mb(billed.memory_peak_mb);
  u.set_read_bytes(billed.read_bytes);
  u.set_write_bytes(billed.write_bytes);
  u.set_gpus(billed.gpus);
  u.set_gpu_seconds(billed.gpu_seconds);
  if (billed.claim.has_value()) *u.mutable_center_claim() = *billed.claim;
  if (offer.has_value()) {
    // The price in force when the attempt started (a later change does not reprice it), by
    // the control plane's own clock: the submit it sent, not a start the center names.
    accounting::Terms rating;
    rating.price_per_hour = offer->PriceAt(observed.submitted.value_or(start));
    rating.execution_power_watts = offer->execution_power_watts;
    rating.static_power_watts = terms.static_power_watts;
    const accounting::Rated rated = accounting::Rate(rating, wall, a.transfer_seconds());
    u.set_price_per_hour(rated.price_per_hour);
    u.set_cost(rated.cost);
    u.set_energy_kwh(rated.energy_kwh);
  }
  u.set_source(m.estimated ? "control_plane" : "center");
  u.set_billing_month(absl::FormatTime("%Y-%m", billed.ended, absl::UTCTimeZone()));
  if (m.correction) {
    // The difference from the estimate it corrects: the two sum to the center's figures.
    MeteredAttempt estimate{m.index, m.estimate, apb::ReplicaUsage(), true, false, {}};
    accounting::SubtractEstimate(u, MeteredUsageRecord(r, estimate, now, terms));
  }
  return u;
}

}  // namespace jc::jobs
