// Issue 44, Deliver 2: a hard budget admits a job only when its expected cost fits beside what
// is committed, and stops a job that runs past what it reserved; quotas' waiting limit.

#include "services/jobs/admission.h"

#include <catch2/catch.hpp>

#include "common/timestamp.h"

namespace {

namespace v1 = ::jointcloud::v1;
using jc::jobs::Admission;
using jc::jobs::AdmissionCatalog;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

// cpu-1 costs 1 an hour at alpha and 9 at beta; gpu-1 is 10 an hour at alpha only.
class FakeCatalog : public AdmissionCatalog {
 public:
  double HighestPrice(const std::string& spec) const override {
    if (spec == "unpriced") return 0;  // the scheduler has not read the catalog, or nobody prices it
    return spec == "cpu-1" ? 9 : 10;
  }
  std::optional<double> PriceAt(const std::string& center, const std::string& spec, absl::Time) const override {
    if (spec == "cpu-1") return center == "alpha" ? 1 : 9;
    return 10;
  }
  std::optional<std::pair<double, double>> Quantity(const std::string& spec) const override {
    if (spec == "cpu-1") return std::make_pair(1.0, 0.0);
    return std::make_pair(4.0, 1.0);
  }
};

v1::CreateTrainJobRequest Job(const std::string& project, int replicas, const std::string& spec = "cpu-1") {
  v1::CreateTrainJobRequest req;
  req.set_project(project);
  auto* task = req.add_tasks();
  task->set_resource_spec_id(spec);
  task->set_replica_number(replicas);
  return req;
}

v1::ProjectBudget Budget(double monthly, bool hard, double reservation_hours = 0) {
  v1::ProjectBudget b;
  b.set_monthly(monthly);
  b.set_hard(hard);
  b.set_reservation_hours(reservation_hours);
  return b;
}

// A job admitted as `req`, one replica per request replica, each running at `center` since `started`.
v1::JobRecord Running(const v1::CreateTrainJobRequest& req, const std::string& center, absl::Time started) {
  v1::JobRecord r;
  r.set_job_id("job-1");
  r.set_status("running");
  *r.mutable_request() = req;
  for (int t = 0; t < req.tasks_size(); ++t) {
    for (int i = 0; i < req.tasks(t).replica_number(); ++i) {
      auto* rep = r.add_replicas();
      rep->set_task_index(t);
      rep->set_replica_index(i);
      rep->set_state(v1::ReplicaRecord::RUNNING);
      rep->set_center_id(center);
      auto* a = rep->add_attempts();
      a->set_center_id(center);
      *a->mutable_started_at() = jc::ToTimestamp(started);
    }
  }
  return r;
}

}  // namespace

TEST_CASE("a hard budget admits a job only when its expected cost fits beside what is committed [C6][A7]", "[C6][A7]") {
  FakeCatalog catalog;
  Admission admission(&catalog);
  // 9 a month; each cpu-1 replica reserves 9 an hour (its highest price) x 0.5 h = 4.5.
  admission.SetBudgets("2027-01", {{"vision", Budget(9, true, 0.5)}}, {});
  CHECK(admission.ExpectedCost(Job("vision", 1)) == 4.5);

  // A job larger than the headroom: refused, naming spent, committed, its cost and the budget.
  absl::Status big = admission.Admit(Job("vision", 3));
  REQUIRE(big.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(big.message()), Catch::Contains("spent 0") && Catch::Contains("committed 0") &&
                                             Catch::Contains("expected to cost 13.5") &&
                                             Catch::Contains("hard monthly budget of 9"));
  // Exactly fits: admitted, and its cost is committed until the next recount has it.
  REQUIRE(admission.Admit(Job("vision", 2)).ok());
  absl::Status after = admission.Admit(Job("vision", 1));
  CHECK(after.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(after.message()), Catch::Contains("committed 9"));

  // What was spent counts too: 5 ended this month leaves 4, less than one replica's 4.5.
  admission.SetBudgets("2027-01", {{"vision", Budget(9, true, 0.5)}}, {{"vision", 5}});
  admission.BeginRecount(kNow);
  admission.EndRecount();  // no job in memory: nothing committed besides what was spent
  CHECK(admission.Admit(Job("vision", 1)).code() == absl::StatusCode::kResourceExhausted);
  admission.SetBudgets("2027-01", {{"vision", Budget(9, true, 0.5)}}, {{"vision", 4.5}});
  CHECK(admission.Admit(Job("vision", 1)).ok());
}

TEST_CASE("a hard budget does not admit a job it cannot price as free [C6][A7]", "[C6][A7]") {
  FakeCatalog catalog;
  Admission admission(&catalog);
  admission.SetBudgets("2027-01", {{"vision", Budget(9, true, 0.5)}, {"nlp", Budget(9, false, 0.5)}}, {});
  absl::Status unpriced = admission.Admit(Job("vision", 100, "unpriced"));
  CHECK(unpriced.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(unpriced.message()), Catch::Contains("no price is known for spec unpriced"));
  CHECK(admission.Admit(Job("nlp", 100, "unpriced")).ok());  // a soft budget only watches
}

TEST_CASE("a job's retries are committed too: each is another attempt with its own reservation [C6][A7]",
          "[C6][A7]") {
  FakeCatalog catalog;
  Admission admission(&catalog);
  admission.SetBudgets("2027-01", {{"vision", Budget(20, true, 0.5)}}, {});
  v1::CreateTrainJobRequest retried = Job("vision", 1);
  retried.mutable_retry_policy()->set_max_retries(3);
  // 4.5 an attempt, four attempts: a job that fails just before its reservation ends, three
  // times, spends that much.
  CHECK(admission.ExpectedCost(retried) == 18);
  REQUIRE(admission.Admit(retried).ok());
  CHECK(admission.Admit(retried).code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("a running job holds what is left of its reservation, and soft budgets never refuse [C6][A7]", "[C6][A7]") {
  FakeCatalog catalog;
  Admission admission(&catalog);
  admission.SetBudgets("2027-01", {{"vision", Budget(10, true, 1)}, {"nlp", Budget(1, false, 1)}}, {});
  // A 1-replica job at alpha (1 an hour) for 30 minutes: 0.5 spent, 9 - 0.5 still held.
  admission.BeginRecount(kNow);
  admission.Count(Running(Job("vision", 1), "alpha", kNow - absl::Minutes(30)));
  admission.EndRecount();
  CHECK(admission.UsedRatio("vision") == Approx(0.05));
  CHECK(admission.Admit(Job("vision", 1)).code() == absl::StatusCode::kResourceExhausted);  // 0.5 + 8.5 + 9 > 10
  CHECK(admission.StopReason(Running(Job("vision", 1), "alpha", kNow - absl::Minutes(30))).empty());

  // A soft budget, far passed: admitted, never stopped.
  for (int i = 0; i < 5; ++i) CHECK(admission.Admit(Job("nlp", 4)).ok());
  CHECK(admission.StopReason(Running(Job("nlp", 1), "beta", kNow - absl::Hours(5))).empty());
  // No budget at all: admitted.
  CHECK(admission.Admit(Job("ops", 100)).ok());
}

TEST_CASE("a hard-budget job that runs past its reservation is told to stop [C6][A7]", "[C6][A7]") {
  FakeCatalog catalog;
  Admission admission(&catalog);
  admission.SetBudgets("2027-01", {{"vision", Budget(100, true, 2)}}, {});
  admission.BeginRecount(kNow);
  admission.EndRecount();
  CHECK(admission.StopReason(Running(Job("vision", 1), "beta", kNow - absl::Minutes(119))).empty());
  CHECK(admission.StopReason(Running(Job("vision", 1), "beta", kNow - absl::Minutes(121))) ==
        "stopped: ran past its budget reservation of 2 h in project vision (hard budget)");
  // Already stopping, or ended: nothing more to do.
  v1::JobRecord stopping = Running(Job("vision", 1), "beta", kNow - absl::Hours(3));
  stopping.set_stop_requested(true);
  CHECK(admission.StopReason(stopping).empty());
  // A closed attempt is not running.
  v1::JobRecord closed = Running(Job("vision", 1), "beta", kNow - absl::Hours(3));
  closed.mutable_replicas(0)->mutable_attempts(0)->set_closed(true);
  CHECK(admission.StopReason(closed).empty());

  // A center cannot make an attempt older than the control plane saw it: one it says started
  // three hours ago, submitted a minute ago by the control plane's clock, ran a minute.
  v1::JobRecord backdated = Running(Job("vision", 1), "beta", kNow - absl::Hours(3));
  *backdated.mutable_replicas(0)->mutable_attempts(0)->mutable_submitted_at() =
      jc::ToTimestamp(kNow - absl::Minutes(1));
  CHECK(admission.StopReason(backdated).empty());
  admission.BeginRecount(kNow);
  admission.Count(backdated);
  admission.EndRecount();
  CHECK(admission.UsedRatio("vision") == Approx(9.0 / 60 / 100));  // a minute at 9 an hour, of 100

  // stop_running: every running job of a project whose hard budget is spent stops.
  v1::ProjectBudget stop = Budget(1, true, 2);
  stop.set_stop_running(true);
  admission.SetBudgets("2027-01", {{"ops", stop}}, {{"ops", 1}});
  admission.BeginRecount(kNow);
  admission.EndRecount();
  CHECK(admission.StopReason(Running(Job("ops", 1), "alpha", kNow - absl::Minutes(1))) ==
        "stopped: project ops reached its hard monthly budget (stop_running)");
}

TEST_CASE("a project quota refuses a job once as many wait as it allows, and a refused job holds nothing [C6]",
          "[C6]") {
  FakeCatalog catalog;
  Admission admission(&catalog);
  v1::ProjectQuota quota;
  quota.set_max_queued_jobs(2);
  quota.set_max_running_gpus(2);
  admission.SetQuotas({{"vision", quota}});
  admission.SetBudgets("2027-01", {{"vision", Budget(100, true, 1)}}, {});
  CHECK(admission.Admit(Job("vision", 1)).ok());
  CHECK(admission.Admit(Job("vision", 1)).ok());
  absl::Status third = admission.Admit(Job("vision", 1));
  CHECK(third.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(third.message()), Catch::Contains("max_queued_jobs 2"));
  // One of them is placed whole before the next recount: it waits no more.
  admission.Placed("vision");
  CHECK(admission.Admit(Job("vision", 1)).ok());
  CHECK(!admission.Admit(Job("vision", 1)).ok());
  // The refused jobs committed nothing to the budget: 3 x 9 held, 73 left.
  admission.SetQuotas({});
  CHECK(admission.Admit(Job("vision", 8)).ok());   // 27 + 72 = 99
  CHECK(!admission.Admit(Job("vision", 1)).ok());  // 99 + 9 > 100

  // Running limits: placed replicas count by the catalog's quantities.
  admission.SetQuotas({{"vision", quota}});
  admission.BeginRecount(kNow);
  admission.Count(Running(Job("vision", 1, "gpu-1"), "alpha", kNow));
  admission.EndRecount();
  CHECK(admission.Hold("vision", 4, 1).empty());
  CHECK_THAT(admission.Hold("vision", 8, 2), Catch::Contains("runs 1 of its 2 GPUs"));
}

TEST_CASE("a hard budget admits a service's scale to more replicas only when the added ones fit, as a create of them "
          "would [A17][C6]",
          "[A17][C6]") {
  FakeCatalog catalog;
  Admission admission(&catalog);
  admission.SetBudgets("2027-01", {{"vision", Budget(9, true, 0.5)}}, {});  // each cpu-1 replica reserves 4.5
  auto service = Job("vision", 1);
  service.mutable_tasks(0)->set_kind("service");
  REQUIRE(admission.Admit(service).ok());  // 4.5 of 9 committed
  const v1::JobRecord job = Running(service, "alpha", kNow);
  absl::Status two_more = admission.AdmitScale(job, 0, 2);  // 9 more: does not fit beside 4.5
  CHECK(two_more.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(two_more.message()), Catch::Contains("expected to cost 9"));
  REQUIRE(admission.AdmitScale(job, 0, 1).ok());  // exactly fits, and is committed
  CHECK(admission.AdmitScale(job, 0, 1).code() == absl::StatusCode::kResourceExhausted);
  CHECK(admission.AdmitScale(job, 0, -2).ok());  // fewer replicas commit nothing more
  // The recount holds what the job's request says: a scale writes its new count there.
  v1::JobRecord three = job;
  three.mutable_request()->mutable_tasks(0)->set_replica_number(2);
  admission.BeginRecount(kNow);
  admission.Count(three);
  admission.EndRecount();
  CHECK(admission.Admit(Job("vision", 1)).code() == absl::StatusCode::kResourceExhausted);
  // A spec no one prices is not scaled for free.
  auto unpriced = Job("vision", 1, "unpriced");
  CHECK(admission.AdmitScale(Running(unpriced, "alpha", kNow), 0, 1).code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("a service past its budget reservation runs on while the hard budget has room beyond what is committed, "
          "and stops once it has none [A17][C6]",
          "[A17][C6]") {
  FakeCatalog catalog;
  Admission admission(&catalog);
  admission.SetBudgets("2027-01", {{"vision", Budget(100, true, 2)}}, {});
  auto service = Job("vision", 1);
  service.mutable_tasks(0)->set_kind("service");
  // Three hours at 9 an hour at beta: 27 spent, past its 2 h; nothing else committed.
  const v1::JobRecord web = Running(service, "beta", kNow - absl::Hours(3));
  admission.BeginRecount(kNow);
  admission.Count(web);
  admission.EndRecount();
  CHECK(admission.StopReason(web).empty());
  // A batch job that ran as long is stopped (it committed no more).
  CHECK(admission.StopReason(Running(Job("vision", 1), "beta", kNow - absl::Hours(3))) ==
        "stopped: ran past its budget reservation of 2 h in project vision (hard budget)");
  // Four batch jobs admitted, each holding 18 (9 an hour for 2 h): 27 + 72 = 99 committed,
  // room left. A fifth commits the rest: the service stops, so that what they were admitted
  // with stays covered.
  std::vector<v1::JobRecord> admitted;
  for (int i = 0; i < 4; ++i) admitted.push_back(Running(Job("vision", 1), "beta", kNow));
  auto recount = [&] {
    admission.BeginRecount(kNow);
    admission.Count(web);
    for (const auto& j : admitted) admission.Count(j);
    admission.EndRecount();
  };
  recount();
  CHECK(admission.StopReason(web).empty());  // 27 + 4 x 18 = 99 < 100
  admitted.push_back(Running(Job("vision", 1), "beta", kNow));
  recount();
  CHECK(admission.StopReason(web) ==
        "stopped: ran past its budget reservation of 2 h in project vision (hard budget), whose budget has no room "
        "left beyond what is committed");
  // Within its reservation, a service is never stopped for it.
  const v1::JobRecord young = Running(service, "beta", kNow - absl::Minutes(30));
  CHECK(admission.StopReason(young).empty());
}

// helper-67 (session 67): scheduling.priority ranks above every queue order and fair share,
// and any member chose it freely: one project's jobs at the top priority went ahead of every
// other project's. A project asks no more than it was granted (Slurm's QOS, LSF's
// MAX_USER_PRIORITY).
TEST_CASE("a job asks a priority above 0 only up to its project's max_priority: more is refused naming the bound, "
          "lowering one's own is anyone's, and before the quotas are read a raised priority waits [C6][A11]",
          "[C6][A11]") {
  FakeCatalog catalog;
  Admission admission(&catalog);
  auto at = [](const std::string& project, int priority) {
    v1::CreateTrainJobRequest req = Job(project, 1);
    req.mutable_scheduling()->set_priority(priority);
    return req;
  };
  // Right after a start, before the first read: a raised priority cannot be judged yet.
  CHECK(admission.Admit(at("vision", 0)).ok());
  CHECK(admission.Admit(at("vision", -50)).ok());
  CHECK(admission.Admit(at("vision", 1)).code() == absl::StatusCode::kUnavailable);
  // vision was granted 100; nlp nothing (no quota row at all).
  v1::ProjectQuota granted;
  granted.set_max_priority(100);
  admission.SetQuotas({{"vision", granted}});
  CHECK(admission.Admit(at("vision", 100)).ok());
  absl::Status above = admission.Admit(at("vision", 101));
  CHECK(above.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(above.message()), Catch::Contains("scheduling.priority 101 is above what project vision's "
                                                            "jobs may ask (its quota's max_priority, 100)"));
  absl::Status nlp = admission.Admit(at("nlp", 1));
  CHECK(nlp.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(nlp.message()), Catch::Contains("max_priority, 0"));
  CHECK(admission.Admit(at("nlp", -1000000)).ok());
  // A job without a project is an admin's: not bounded.
  CHECK(admission.Admit(at("", 1000000)).ok());
  // A project with only a priority grant is not counted as limited: its jobs queue freely.
  CHECK(admission.Hold("vision", 100, 100).empty());
}
