// What a job watcher is told about each change of a job (SPEC C8).
#include <catch2/catch.hpp>

#include "services/jobs/job_events.h"

namespace v1 = ::jointcloud::v1;
using jc::jobs::EventOf;

namespace {

v1::JobRecord Job(int replicas) {
  v1::JobRecord r;
  r.set_job_id("job-1");
  r.set_status("pending");
  r.mutable_request()->set_name("train");
  r.mutable_request()->set_project("vision");
  for (int i = 0; i < replicas; ++i) {
    auto* rep = r.add_replicas();
    rep->set_task_index(0);
    rep->set_replica_index(i);
  }
  return r;
}

}  // namespace

TEST_CASE("a new job is one CREATED event naming every replica", "[C8]") {
  auto e = EventOf(nullptr, Job(2), absl::FromUnixSeconds(100));
  REQUIRE(e.has_value());
  CHECK(e->type() == v1::TrainJobEvent::CREATED);
  CHECK(e->job_id() == "job-1");
  CHECK(e->project() == "vision");
  CHECK(e->name() == "train");
  CHECK(e->status() == "pending");
  REQUIRE(e->replicas_size() == 2);
  CHECK(e->replicas(1).phase() == "waiting");
  CHECK(e->replicas(1).status() == "pending");
  CHECK(e->at().seconds() == 100);
}

TEST_CASE("an update names only the replicas that moved, with where they went", "[C8]") {
  v1::JobRecord before = Job(3);
  v1::JobRecord after = before;
  after.mutable_replicas(1)->set_state(v1::ReplicaRecord::DISPATCHING);
  after.mutable_replicas(1)->set_center_id("center-b");
  auto e = EventOf(&before, after, absl::Now());
  REQUIRE(e.has_value());
  CHECK(e->type() == v1::TrainJobEvent::UPDATED);
  REQUIRE(e->replicas_size() == 1);
  CHECK(e->replicas(0).replica_index() == 1);
  CHECK(e->replicas(0).center_id() == "center-b");
  CHECK(e->replicas(0).phase() == "dispatching");
  CHECK(e->replicas(0).previous_phase() == "waiting");
  CHECK(e->previous_status() == "pending");

  SECTION("a retry elsewhere is an event even when the phase is the same") {
    v1::JobRecord retried = after;
    retried.mutable_replicas(1)->set_center_id("center-c");
    retried.mutable_replicas(1)->set_attempt(1);
    auto again = EventOf(&after, retried, absl::Now());
    REQUIRE(again.has_value());
    CHECK(again->replicas(0).attempt() == 1);
    CHECK(again->replicas(0).center_id() == "center-c");
  }
}

TEST_CASE("reaching completed or failed is ENDED, and a change nobody sees is no event", "[C8]") {
  v1::JobRecord before = Job(1);
  before.set_status("running");
  before.mutable_replicas(0)->set_state(v1::ReplicaRecord::RUNNING);
  v1::JobRecord after = before;
  after.set_status("failed");
  after.set_status_reason("replica 0 of task 0 failed: exit code 3");
  after.mutable_replicas(0)->set_state(v1::ReplicaRecord::FAILED);
  after.mutable_replicas(0)->set_exit_code(3);
  auto e = EventOf(&before, after, absl::Now());
  REQUIRE(e.has_value());
  CHECK(e->type() == v1::TrainJobEvent::ENDED);
  CHECK(e->status() == "failed");
  CHECK(e->previous_status() == "running");
  CHECK(e->status_reason() == "replica 0 of task 0 failed: exit code 3");
  CHECK(e->replicas(0).exit_code() == 3);

  v1::JobRecord waiting = Job(1);
  v1::JobRecord reason = waiting;
  reason.set_waiting_reason("no center has 8 GPUs free");
  CHECK_FALSE(EventOf(&waiting, reason, absl::Now()).has_value());
}

TEST_CASE("a stored event reads back as written, and so do rows stored as JSON before", "[C8]") {
  auto e = EventOf(nullptr, Job(2), absl::FromUnixSeconds(100));
  REQUIRE(e.has_value());
  e->set_revision(42);
  e->set_status_reason("quotes \" and a newline\n, 中文");
  auto back = jc::jobs::DecodeEvent(jc::jobs::EncodeEvent(*e));
  REQUIRE(back.ok());
  CHECK(back->DebugString() == e->DebugString());

  auto json = jc::jobs::DecodeEvent(std::string(R"({"revision":"7","type":"ENDED","job_id":"job-9","status":"failed"})"));
  REQUIRE(json.ok());
  CHECK(json->revision() == 7);
  CHECK(json->type() == v1::TrainJobEvent::ENDED);
  CHECK(json->job_id() == "job-9");

  CHECK(jc::jobs::DecodeEvent(std::string("not base64 !")).status().code() == absl::StatusCode::kDataLoss);
  CHECK(jc::jobs::DecodeEvent(std::nullopt).status().code() == absl::StatusCode::kDataLoss);
}
