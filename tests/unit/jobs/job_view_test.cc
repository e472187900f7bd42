// How a stored job reads (SPEC A7): replicas per task in replica order, the history in
// task/replica/attempt order with run times, the queue position only while pending.

#include <catch2/catch.hpp>

#include "common/timestamp.h"
#include "services/jobs/job_view.h"

namespace jc::jobs {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

v1::ReplicaRecord* AddReplica(v1::JobRecord& r, int task, int replica, v1::ReplicaRecord::State state,
                              const std::string& center) {
  auto* rep = r.add_replicas();
  rep->set_task_index(task);
  rep->set_replica_index(replica);
  rep->set_state(state);
  rep->set_center_id(center);
  return rep;
}

v1::JobRecord Record() {
  v1::JobRecord r;
  r.set_job_id("job-7");
  r.set_status("running");
  auto* req = r.mutable_request();
  req->set_name("train");
  req->set_user_name("alice");
  req->set_project("vision");
  auto* t0 = req->add_tasks();
  t0->set_name("ps");
  t0->set_resource_spec_id("cpu-1");
  t0->set_replica_number(1);
  auto* t1 = req->add_tasks();
  t1->set_name("worker");
  t1->set_resource_spec_id("gpu-1");
  t1->set_replica_number(2);
  *r.mutable_received_at() = ToTimestamp(kT0);
  // Stored out of order: task 1's second replica first.
  auto* w1 = AddReplica(r, 1, 1, v1::ReplicaRecord::WAITING, "");
  w1->set_message("no center can run it now");
  auto* w0 = AddReplica(r, 1, 0, v1::ReplicaRecord::RUNNING, "beta");
  auto* a0 = w0->add_attempts();
  a0->set_attempt(0);
  a0->set_center_id("alpha");
  *a0->mutable_placed_at() = ToTimestamp(kT0);
  *a0->mutable_started_at() = ToTimestamp(kT0 + absl::Seconds(5));
  *a0->mutable_ended_at() = ToTimestamp(kT0 + absl::Seconds(65));
  a0->set_outcome("failed");
  a0->set_exit_code(3);
  auto* a1 = w0->add_attempts();
  a1->set_attempt(1);
  a1->set_center_id("beta");
  *a1->mutable_started_at() = ToTimestamp(kT0 + absl::Seconds(100));
  AddReplica(r, 0, 0, v1::ReplicaRecord::RUNNING, "alpha")->add_attempts()->set_center_id("alpha");
  return r;
}

TEST_CASE("a job reads as Appendix A's TrainJob: per task its replicas in replica order, the history by task, "
          "replica and attempt with run times, the queue position only while pending [A7]",
          "[A7]") {
  v1::JobRecord r = Record();
  JobViewOptions options;
  options.now = kT0 + absl::Seconds(160);
  options.queue_position = "2nd of 7 waiting (fcfs)";
  v1::TrainJob j = TrainJobOf(r, options);
  CHECK(j.job_id() == "job-7");
  CHECK(j.user_name() == "alice");
  CHECK(j.project() == "vision");
  CHECK(j.status() == "running");
  CHECK(j.history_size() == 0);  // not asked for
  CHECK(j.queue_position().empty());  // running: no place in the queue
  REQUIRE(j.task_infos_size() == 2);
  CHECK(j.task_infos(0).name() == "ps");
  CHECK(std::vector<std::string>(j.task_infos(0).center_ids().begin(), j.task_infos(0).center_ids().end()) ==
        std::vector<std::string>{"alpha"});
  // Task 1's replicas as stored: replica 1 (waiting, not placed: "") then replica 0.
  CHECK(std::vector<std::string>(j.task_infos(1).center_ids().begin(), j.task_infos(1).center_ids().end()) ==
        std::vector<std::string>{"", "beta"});
  CHECK(j.task_infos(1).replica_messages(0) == "no center can run it now");

  options.with_history = true;
  j = TrainJobOf(r, options);
  REQUIRE(j.history_size() == 3);
  // Sorted: task 0 replica 0, then task 1 replica 0's two attempts.
  CHECK(j.history(0).task_index() == 0);
  CHECK(j.history(0).elapsed_seconds() == 0);  // never started
  CHECK(j.history(1).task_index() == 1);
  CHECK(j.history(1).attempt() == 0);
  CHECK(j.history(1).outcome() == "failed");
  CHECK(j.history(1).exit_code() == 3);
  CHECK(j.history(1).elapsed_seconds() == Approx(60));  // started to ended
  CHECK(j.history(2).attempt() == 1);
  CHECK(j.history(2).center_id() == "beta");
  CHECK(j.history(2).elapsed_seconds() == Approx(60));  // started to now: it runs

  r.set_status("pending");
  CHECK(TrainJobOf(r, options).queue_position() == "2nd of 7 waiting (fcfs)");
}

}  // namespace
}  // namespace jc::jobs

TEST_CASE("a job's cost: its ended attempts' kept costs, its running ones by the hour at their submit's price, and "
          "partial only where metering left a record's cost out [A12][C6]",
          "[A12][C6]") {
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  jointcloud::v1::JobRecord r;
  r.mutable_request()->add_tasks()->set_resource_spec_id("cpu-1");
  auto* rep = r.add_replicas();
  auto* ended = rep->add_attempts();
  ended->set_center_id("a");
  ended->set_closed(true);
  ended->set_metered(true);
  ended->set_cost(2.5);
  auto* running = rep->add_attempts();
  running->set_center_id("a");
  *running->mutable_submitted_at() = jc::ToTimestamp(t0);
  *running->mutable_started_at() = jc::ToTimestamp(t0 + absl::Minutes(1));
  jc::jobs::JobViewOptions o;
  o.now = t0 + absl::Minutes(31);
  o.price_at = [&](const std::string& center, const std::string& spec, absl::Time at) -> std::optional<double> {
    CHECK(center == "a");
    CHECK(spec == "cpu-1");
    return at <= t0 ? 2.0 : 100.0;  // the price of its submit, not a later one
  };
  auto cost = jc::jobs::CostOf(r, o);
  CHECK(cost.ended() == Approx(2.5));
  CHECK(cost.running() == Approx(1.0));  // 30 min at 2 an hour
  CHECK(cost.total() == Approx(3.5));
  CHECK(cost.running_attempts() == 1);
  CHECK_FALSE(cost.partial());
  // An attempt metered before costs were kept: partial; without metering, nothing is missing.
  ended->clear_cost();
  CHECK(jc::jobs::CostOf(r, o).partial());
  o.metering = false;
  CHECK_FALSE(jc::jobs::CostOf(r, o).partial());
}
