// What an ended attempt teaches the duration estimator (SPEC A16, issue 45's house): a run
// that ended on its own or by its time limit, measured by the center within what the
// control plane saw, once per task; nothing without an estimator; and the stored rows
// trimmed to the estimator's size at most hourly once it is full.

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "common/timestamp.h"
#include "services/jobs/duration_learning.h"

namespace {

namespace v1 = ::jointcloud::v1;
using jc::jobs::DurationLearning;
using jc::jobs::JobEffects;
using jc::jobs::MeteredAttempt;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

v1::JobRecord Job(int replicas) {
  v1::JobRecord job;
  job.set_job_id("job-1");
  job.mutable_request()->set_project("vision");
  auto* task = job.mutable_request()->add_tasks();
  task->set_name("train");
  task->set_resource_spec_id("gpu-1");
  task->set_replica_number(replicas);
  for (int i = 0; i < replicas; ++i) job.add_replicas()->set_replica_index(i);
  return job;
}

// Replica `index`'s attempt at center "a": sent at kT0, started a minute later, ran `ran`,
// ended `outcome`, seen ended at once.
MeteredAttempt Ended(int index, absl::Duration ran, const std::string& outcome) {
  MeteredAttempt m;
  m.index = index;
  m.attempt.set_center_id("a");
  *m.attempt.mutable_submitted_at() = jc::ToTimestamp(kT0);
  *m.attempt.mutable_started_at() = jc::ToTimestamp(kT0 + absl::Minutes(1));
  *m.attempt.mutable_ended_at() = jc::ToTimestamp(kT0 + absl::Minutes(1) + ran);
  *m.attempt.mutable_seen_ended_at() = jc::ToTimestamp(kT0 + absl::Minutes(1) + ran);
  m.attempt.set_outcome(outcome);
  return m;
}

DurationLearning Learning() {
  return DurationLearning([](const std::string&) { return 1.0; });
}

}  // namespace

TEST_CASE("an attempt that succeeded teaches its task's length once, by its first replica, and a failure, a stop, "
          "an estimate teach nothing [A16]",
          "[A16]") {
  jc::estimator::SharedEstimator estimator;
  DurationLearning learning = Learning();
  std::map<std::string, std::string> rows;
  JobEffects fx;
  fx.metered = {Ended(0, absl::Minutes(10), "succeeded"), Ended(1, absl::Minutes(10), "succeeded")};
  learning.Learn(Job(2), fx, &rows);
  CHECK(rows.empty());  // no estimator: nothing learned

  learning.SetEstimator(&estimator);
  fx.metered = {Ended(1, absl::Minutes(10), "succeeded"), Ended(0, absl::Minutes(10), "failed"),
                Ended(0, absl::Minutes(10), "stopped")};
  fx.metered.push_back(Ended(0, absl::Minutes(10), "succeeded"));
  fx.metered.back().estimated = true;
  learning.Learn(Job(2), fx, &rows);
  CHECK(rows.empty());
  CHECK(estimator.keys() == 0);

  fx.metered = {Ended(0, absl::Minutes(10), "succeeded"), Ended(1, absl::Minutes(10), "succeeded")};
  learning.Learn(Job(2), fx, &rows);
  CHECK_FALSE(rows.empty());
  const int64_t keys = estimator.keys();
  CHECK(keys > 0);
  CHECK(static_cast<int64_t>(rows.size()) == keys);
}

TEST_CASE("a run its time limit stopped is learned (a lower bound), a plain stop is not [A16]", "[A16]") {
  jc::estimator::SharedEstimator estimator;
  DurationLearning learning = Learning();
  learning.SetEstimator(&estimator);
  v1::JobRecord job = Job(1);
  JobEffects fx;
  fx.metered = {Ended(0, absl::Minutes(10), "stopped")};
  std::map<std::string, std::string> rows;
  learning.Learn(job, fx, &rows);
  CHECK(rows.empty());
  job.set_stop_reason(std::string("stopped: replica 0 of task train ") + jc::jobs::kTimeLimitStop + " of 10m");
  learning.Learn(job, fx, &rows);
  CHECK_FALSE(rows.empty());
}

TEST_CASE("the stored rows are trimmed to the estimator's size once it is full, at most hourly [A16]", "[A16]") {
  jc::estimator::EstimatorOptions options;
  options.max_keys = 2;
  jc::estimator::SharedEstimator estimator(options);
  DurationLearning learning = Learning();
  CHECK(learning.RowsToKeep(kT0) == 0);  // no estimator
  learning.SetEstimator(&estimator);
  CHECK(learning.RowsToKeep(kT0) == 0);  // not full
  JobEffects fx;
  fx.metered = {Ended(0, absl::Minutes(10), "succeeded")};
  std::map<std::string, std::string> rows;
  learning.Learn(Job(1), fx, &rows);
  REQUIRE(estimator.keys() >= estimator.max_keys());
  CHECK(learning.RowsToKeep(kT0) == 2);
  CHECK(learning.RowsToKeep(kT0 + absl::Minutes(59)) == 0);
  CHECK(learning.RowsToKeep(kT0 + absl::Hours(1)) == 2);
}
