// What the control plane keeps of an attempt's start when its center reports one (issue 44):
// the center's clock, within what the control plane saw, and once set only ever earlier.

#include "services/jobs/attempt_history.h"

#include <catch2/catch.hpp>

#include "common/timestamp.h"

namespace {

namespace v1 = ::jointcloud::v1;
namespace apb = ::jointcloud::adapter::v1;

TEST_CASE("a center cannot keep an attempt fresh by reporting a later start at every poll [A7][C6]", "[A7][C6]") {
  const absl::Time sent = absl::FromUnixSeconds(1'800'000'000);
  v1::JobRecord job;
  job.set_job_id("job-1");
  auto* rep = job.add_replicas();
  rep->set_center_id("alpha");
  jc::jobs::NotePlaced(job, 0, sent);
  auto report = [&](absl::Time started, absl::Time now) {
    apb::Replica r;
    r.mutable_key()->set_job_id("job-1");
    r.set_state(apb::REPLICA_RUNNING);
    *r.mutable_started_at() = jc::ToTimestamp(started);
    jc::jobs::JobEffects fx;
    jc::jobs::ApplyAttemptReport(job, 0, "alpha", r, now, &fx);
    return jc::FromTimestamp(job.replicas(0).attempts(0).started_at());
  };
  CHECK(report(sent + absl::Seconds(5), sent + absl::Seconds(10)) == sent + absl::Seconds(5));
  // Later reports that it started later: the start stays (before: it moved each time, so the
  // attempt never ran past its budget reservation and cost next to nothing while running).
  CHECK(report(sent + absl::Minutes(50), sent + absl::Minutes(51)) == sent + absl::Seconds(5));
  CHECK(report(sent + absl::Hours(2), sent + absl::Hours(2)) == sent + absl::Seconds(5));
  // Earlier (a correction), it moves, never before the control plane sent it.
  CHECK(report(sent + absl::Seconds(2), sent + absl::Hours(2)) == sent + absl::Seconds(2));
  CHECK(report(sent - absl::Hours(5), sent + absl::Hours(2)) == sent);
}

TEST_CASE("a center's end of an attempt is kept within what was seen: not after the report came, not before the "
          "start, so a time past 9999 never reaches a record that every list prints [A7][C6]",
          "[A7][C6]") {
  const absl::Time sent = absl::FromUnixSeconds(1'800'000'000);
  auto ended = [&](google::protobuf::Timestamp at, absl::Time now) {
    v1::JobRecord job;
    job.set_job_id("job-1");
    job.add_replicas()->set_center_id("alpha");
    jc::jobs::NotePlaced(job, 0, sent);
    apb::Replica r;
    r.mutable_key()->set_job_id("job-1");
    r.set_state(apb::REPLICA_SUCCEEDED);
    *r.mutable_started_at() = jc::ToTimestamp(sent + absl::Seconds(5));
    *r.mutable_ended_at() = at;
    jc::jobs::JobEffects fx;
    jc::jobs::ApplyAttemptReport(job, 0, "alpha", r, now, &fx);
    return job.replicas(0).attempts(0).ended_at();
  };
  const absl::Time now = sent + absl::Minutes(10);
  CHECK(jc::FromTimestamp(ended(jc::ToTimestamp(sent + absl::Minutes(3)), now)) == sent + absl::Minutes(3));
  google::protobuf::Timestamp far;
  far.set_seconds(INT64_MAX / 2);
  CHECK(jc::FromTimestamp(ended(far, now)) == now);
  far.set_seconds(-INT64_MAX / 2);
  CHECK(jc::FromTimestamp(ended(far, now)) == sent + absl::Seconds(5));
}

}  // namespace
