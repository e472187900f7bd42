// Reconciliation's comparison (issue 31): what is missing, extra or different between the
// federation's records and a center's own accounting, within a tolerance.

#include <catch2/catch.hpp>

#include "common/timestamp.h"
#include "services/accounting/reconciliation.h"

namespace v1 = jointcloud::v1;
namespace apb = jointcloud::adapter::v1;

namespace {

const absl::Time kFrom = absl::FromUnixSeconds(1'800'000'000);
const absl::Time kTo = kFrom + absl::Hours(24);

v1::UsageRecord Record(const std::string& job, double wall, absl::Time end, const std::string& outcome = "succeeded") {
  v1::UsageRecord r;
  r.set_record_id(job + "/0/0/0");
  r.set_ai_center_id("bj");
  r.set_outcome(outcome);
  r.set_wall_seconds(wall);
  *r.mutable_ended_at() = jc::ToTimestamp(end);
  return r;
}

apb::AccountingEntry Entry(const std::string& job, double wall, absl::Time end, const std::string& origin = "us",
                           apb::ReplicaState state = apb::REPLICA_SUCCEEDED) {
  apb::AccountingEntry e;
  e.mutable_key()->set_job_id(job);
  e.mutable_key()->set_origin(origin);
  e.set_state(state);
  *e.mutable_started_at() = jc::ToTimestamp(end - absl::Seconds(wall));
  *e.mutable_ended_at() = jc::ToTimestamp(end);
  e.mutable_usage()->set_wall_seconds(wall);
  return e;
}

}  // namespace

TEST_CASE("reconciliation: missing, extra and different are told apart, within the tolerance, for this control "
          "plane's replicas ending in the period [A7][A14]",
          "[A7][A14]") {
  absl::Time mid = kFrom + absl::Hours(12);
  std::vector<v1::UsageRecord> records = {
      Record("same", 100, mid),        Record("close", 100, mid),  Record("apart", 100, mid),
      Record("extra", 50, mid),        Record("outcome", 10, mid), Record("outside", 10, kTo + absl::Hours(2)),
      Record("gone", 10, mid)};
  apb::ListAccountingResponse center;
  center.set_source("slurm");
  for (auto e : {Entry("same", 100, mid), Entry("close", 103, mid), Entry("apart", 160, mid),
                 Entry("outcome", 10, mid, "us", apb::REPLICA_FAILED), Entry("outside", 10, kTo + absl::Hours(2)),
                 Entry("missing", 30, mid), Entry("theirs", 30, mid, "another-control-plane")}) {
    *center.add_entries() = e;
  }
  apb::AccountingEntry unknown;  // the adapter ran it, the center has no record now
  unknown.mutable_key()->set_job_id("gone");
  unknown.mutable_key()->set_origin("us");
  *center.add_entries() = unknown;

  // An estimate (its center was silent past the grace) and the correction that followed:
  // their sum is what is compared.
  records.push_back(Record("corrected", 10, mid));
  v1::UsageRecord correction = Record("corrected", 90, mid);
  correction.set_record_id("corrected/0/0/0/c1");
  correction.set_corrects("corrected/0/0/0");
  records.push_back(correction);
  *center.add_entries() = Entry("corrected", 100, mid);

  v1::ReconcileResponse r = jc::accounting::Compare("bj", records, center, kFrom, kTo, "us", 5, 0.05);
  CHECK(r.center_source() == "slurm");
  CHECK(r.federation_records() == 7);  // "outside" ended after the period
  CHECK(r.matched() == 3);             // same, close (3 s apart: within 5 s), corrected
  std::map<std::string, v1::Difference> by;
  for (const auto& d : r.differences()) by[d.record_id() + ":" + d.kind() + ":" + d.field()] = d;
  CHECK(by.count("apart/0/0/0:different:wall_seconds") == 1);
  CHECK(by["apart/0/0/0:different:wall_seconds"].center() == 160);
  CHECK(by.count("extra/0/0/0:extra:") == 1);
  CHECK(by.count("gone/0/0/0:extra:") == 1);
  CHECK(by["gone/0/0/0:extra:"].detail() == "the center has no record of it");
  CHECK(by.count("outcome/0/0/0:different:outcome") == 1);
  CHECK(by.count("missing/0/0/0:missing:") == 1);
  CHECK(by.count("theirs/0/0/0:missing:") == 0);  // another control plane's replica
  CHECK(r.differences_size() == 5);

  // A wider tolerance takes "apart" in.
  v1::ReconcileResponse loose = jc::accounting::Compare("bj", records, center, kFrom, kTo, "us", 60, 0.05);
  CHECK(loose.matched() == 4);
}
