// The usage record of an attempt (issue 31, SPEC A7/A12): its id is the attempt's, it is
// priced at the price in force when the control plane sent the attempt, a center that no
// longer offers the spec leaves it unpriced, and a correction carries the difference from
// the estimate it corrects.

#include <catch2/catch.hpp>

#include "common/timestamp.h"
#include "services/jobs/usage_record.h"

namespace jc::jobs {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);  // 2027-01-15

v1::JobRecord Record() {
  v1::JobRecord r;
  r.set_job_id("job-9");
  r.mutable_request()->set_project("vision");
  r.mutable_request()->set_user_name("alice");
  auto* t = r.mutable_request()->add_tasks();
  t->set_resource_spec_id("cpu-1");
  auto* rep = r.add_replicas();
  rep->set_task_index(0);
  rep->set_replica_index(0);
  return r;
}

MeteredAttempt Ran(double wall_seconds) {
  MeteredAttempt m;
  m.index = 0;
  m.attempt.set_attempt(0);
  m.attempt.set_center_id("alpha");
  m.attempt.set_outcome("succeeded");
  *m.attempt.mutable_submitted_at() = ToTimestamp(kT0);
  *m.attempt.mutable_started_at() = ToTimestamp(kT0 + absl::Seconds(10));
  *m.attempt.mutable_ended_at() = ToTimestamp(kT0 + absl::Seconds(10 + wall_seconds));
  *m.attempt.mutable_seen_ended_at() = ToTimestamp(kT0 + absl::Seconds(15 + wall_seconds));
  m.usage.set_wall_seconds(wall_seconds);
  m.usage.set_cpu_seconds(wall_seconds / 2);
  return m;
}

UsageTerms Terms() {
  scheduler::SpecAtCenter offer;
  offer.quantity.cpu = 1;
  offer.quantity.memory_mb = 256;
  offer.price = 5;  // today's
  offer.prices = {{kT0 - absl::Hours(24), 2}, {kT0 + absl::Seconds(100), 5}};
  return {offer, 0};
}

TEST_CASE("a usage record is the attempt's, priced as the center priced the spec when the control plane sent it, "
          "unpriced where the center no longer offers it [A7][A12]",
          "[A7][A12]") {
  const absl::Time now = kT0 + absl::Hours(2);
  v1::UsageRecord u = MeteredUsageRecord(Record(), Ran(3600), now, Terms());
  CHECK(u.record_id() == "job-9/0/0/0");
  CHECK(u.project() == "vision");
  CHECK(u.user_name() == "alice");
  CHECK(u.ai_center_id() == "alpha");
  CHECK(u.resource_spec_id() == "cpu-1");
  CHECK(u.source() == "center");
  CHECK(u.wall_seconds() == Approx(3600));
  // The price at the submit (2 an hour), not the one in force when it started running
  // by its center's clock or today (5).
  CHECK(u.price_per_hour() == Approx(2));
  CHECK(u.cost() == Approx(2));
  CHECK(u.billing_month() == absl::FormatTime("%Y-%m", kT0 + absl::Seconds(3610), absl::UTCTimeZone()));

  v1::UsageRecord unpriced = MeteredUsageRecord(Record(), Ran(3600), now, UsageTerms{});
  CHECK(unpriced.cost() == 0);
  CHECK(unpriced.price_per_hour() == 0);
}

TEST_CASE("a center's late report after the control plane's estimate is a correction: the two records sum to the "
          "center's figures [A7][A12]",
          "[A7][A12]") {
  const absl::Time now = kT0 + absl::Hours(3);
  MeteredAttempt estimate = Ran(1800);
  estimate.estimated = true;
  estimate.usage = apb::ReplicaUsage();  // the center said nothing yet
  v1::UsageRecord estimated = MeteredUsageRecord(Record(), estimate, now, Terms());
  CHECK(estimated.source() == "control_plane");

  MeteredAttempt late = Ran(3600);
  late.correction = true;
  late.estimate = estimate.attempt;
  v1::UsageRecord correction = MeteredUsageRecord(Record(), late, now, Terms());
  CHECK(correction.record_id() == "job-9/0/0/0/c1");
  CHECK(correction.corrects() == "job-9/0/0/0");
  v1::UsageRecord whole = MeteredUsageRecord(Record(), Ran(3600), now, Terms());
  CHECK(estimated.cost() + correction.cost() == Approx(whole.cost()));
  CHECK(estimated.wall_seconds() + correction.wall_seconds() == Approx(whole.wall_seconds()));
}

}  // namespace
}  // namespace jc::jobs
