// A create's run-time fields (SPEC A16) are checked where the request enters, whatever the
// transport: gRPC takes the binary message as sent, so a Duration protobuf's JSON cannot hold
// (nanos past a second) would otherwise reach the job's record and fail its write, stepping
// the job manager down on every such create (found by an attacker's review, session 28).
#include <catch2/catch.hpp>
#include <limits>
#include <tuple>
#include <vector>

#include "common/store/doc.h"
#include "services/jobs/validate_create.h"

namespace {

jointcloud::v1::CreateTrainJobRequest Job() {
  jointcloud::v1::CreateTrainJobRequest job;
  job.set_name("train");
  auto* task = job.add_tasks();
  task->set_name("t");
  task->set_command("true");
  task->set_resource_spec_id("cpu-1");
  task->set_replica_number(1);
  return job;
}

TEST_CASE("estimatedDuration and timeLimit must be durations a record can hold: positive, nanos within a "
          "second, at most 366 days [A16][C5]",
          "[A16][C5]") {
  REQUIRE(jc::jobs::ValidateCreate(Job()).ok());
  struct Case {
    int64_t seconds;
    int32_t nanos;
    const char* says;  // empty: accepted
  };
  for (const Case& c : {Case{600, 0, ""}, Case{0, 500000000, ""}, Case{366 * 86400, 999999999, ""},
                        Case{600, 2000000000, "must be a positive duration"}, Case{600, -1, "must be a positive"},
                        Case{0, 0, "must be a positive"}, Case{-5, 0, "must be a positive"},
                        Case{366 * 86400 + 1, 0, "at most 366 days"}}) {
    for (const char* field : {"timeLimit", "estimatedDuration"}) {
      auto job = Job();
      auto* d = std::string(field) == "timeLimit" ? job.mutable_time_limit() : job.mutable_estimated_duration();
      d->set_seconds(c.seconds);
      d->set_nanos(c.nanos);
      absl::Status s = jc::jobs::ValidateCreate(job);
      INFO(field << " " << c.seconds << "s " << c.nanos << "ns: " << s.ToString());
      if (*c.says == 0) {
        CHECK(s.ok());
        // What is accepted is written: the record's JSON holds it.
        CHECK(jc::store::EncodeDoc(job).ok());
      } else {
        CHECK(absl::IsInvalidArgument(s));
        CHECK(std::string(s.message()).find(field) == 0);
        CHECK(std::string(s.message()).find(c.says) != std::string::npos);
      }
    }
  }
}

// Names reach logs, events and the plan's explanation of a learned duration: a newline there
// forges a log line, an escape sequence rewrites an operator's terminal (attacker's review,
// session 29, F8).
// Attacker's review, session 67 (helper-67): any int32 was taken, and the queue's −priority
// of the lowest one overflowed (undefined; in practice first in line).
TEST_CASE("scheduling.priority is within ±1,000,000: the int32's extremes are refused, saying the range [A11][C5]",
          "[A11][C5]") {
  for (int priority : {0, 5, -1000000, 1000000}) {
    auto job = Job();
    job.mutable_scheduling()->set_priority(priority);
    INFO(priority);
    CHECK(jc::jobs::ValidateCreate(job).ok());
  }
  for (int priority : {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 1000001}) {
    auto job = Job();
    job.mutable_scheduling()->set_priority(priority);
    absl::Status s = jc::jobs::ValidateCreate(job);
    INFO(priority);
    CHECK(absl::IsInvalidArgument(s));
    CHECK(std::string(s.message()).find("scheduling.priority: must be -1000000 to 1000000, got ") == 0);
  }
}

TEST_CASE("a create's job and task names hold no control characters: a newline, an escape, DEL, a C1 control or a "
          "bidirectional control is refused naming the field and where [A16][C5]",
          "[A16][C5]") {
  for (const std::string& bad : {std::string("a\nb"), std::string("\x1b[2J"), std::string("x\x7f"),
                                std::string("tab\there"), std::string("c1\xc2\x9b"), std::string("nul\0", 4),
                                std::string("rlo\xe2\x80\xae"), std::string("fsi\xe2\x81\xa8")}) {
    auto job = Job();
    job.set_name(bad);
    absl::Status s = jc::jobs::ValidateCreate(job);
    INFO(s.ToString());
    CHECK(absl::IsInvalidArgument(s));
    CHECK(std::string(s.message()).find("name: no control characters") == 0);
    job = Job();
    job.mutable_tasks(0)->set_name(bad);
    s = jc::jobs::ValidateCreate(job);
    INFO(s.ToString());
    CHECK(absl::IsInvalidArgument(s));
    CHECK(std::string(s.message()).find("tasks[0].name: no control characters") == 0);
  }
  // Printable names of any script are names.
  auto job = Job();
  job.set_name("训练-résumé v2");
  job.mutable_tasks(0)->set_name("worker_0");
  CHECK(jc::jobs::ValidateCreate(job).ok());
}

}  // namespace

TEST_CASE("a task's kind is batch, interactive, service or streaming, one per job, an interactive job is one replica, a "
          "service no gang, and a replicaNumber left out is 1 while an explicit 0 is refused [A17][C5]",
          "[A17][C5]") {
  using jc::jobs::NormalizeCreate;
  using jc::jobs::ValidateCreate;
  auto with_kind = [](const std::string& kind) {
    auto job = Job();
    job.mutable_tasks(0)->set_kind(kind);
    return job;
  };
  for (const char* kind : {"", "batch", "interactive", "service", "streaming"}) {
    INFO(kind);
    CHECK(ValidateCreate(with_kind(kind)).ok());
  }
  auto says = [](const jointcloud::v1::CreateTrainJobRequest& job) { return std::string(ValidateCreate(job).message()); };
  CHECK(says(with_kind("notebook")) == "tasks[0].kind: must be one of batch, interactive, service, streaming, got \"notebook\"");
  CHECK(says(with_kind("Service")).find("tasks[0].kind: must be one of") == 0);  // names are exact

  auto mixed = with_kind("service");
  *mixed.add_tasks() = Job().tasks(0);  // batch
  CHECK(says(mixed) == "tasks[1].kind: every task of a job is of one kind; tasks[0] is service, this one batch");

  auto two_replicas = with_kind("interactive");
  two_replicas.mutable_tasks(0)->set_replica_number(2);
  CHECK(says(two_replicas) == "tasks[0].replicaNumber: an interactive job has one replica, got 2");
  auto two_tasks = with_kind("interactive");
  *two_tasks.add_tasks() = two_tasks.tasks(0);
  CHECK(says(two_tasks) == "tasks[0].kind: an interactive job has one task, got 2");

  auto gang = with_kind("streaming");
  gang.mutable_tasks(0)->set_replica_number(3);
  gang.mutable_scheduling()->set_gang(true);
  CHECK(says(gang) == "scheduling.gang: a streaming job's replicas start, and start again, one by one; no gang");

  auto limited = with_kind("service");
  limited.mutable_time_limit()->set_seconds(60);
  CHECK(says(limited) == "timeLimit: a service job runs until stopped; it takes no time limit");
  auto notebook_limit = with_kind("interactive");
  notebook_limit.mutable_time_limit()->set_seconds(3600);  // an interactive job's longest life
  CHECK(ValidateCreate(notebook_limit).ok());

  // replicaNumber: left out, one replica; an explicit 0 is refused (never taken for 1).
  auto absent = with_kind("service");
  absent.mutable_tasks(0)->clear_replica_number();
  NormalizeCreate(absent);
  CHECK(absent.tasks(0).replica_number() == 1);
  CHECK(ValidateCreate(absent).ok());
  auto zero = with_kind("service");
  zero.mutable_tasks(0)->set_replica_number(0);
  NormalizeCreate(zero);
  CHECK(says(zero) == "tasks[0].replicaNumber: must be 1 to 1000, got 0");
}

TEST_CASE("a scale is for a service or streaming job that runs, to 1 to 1000 replicas of a task it has [A17][C5]",
          "[A17][C5]") {
  using jc::jobs::CheckScale;
  jointcloud::v1::JobRecord job;
  job.set_job_id("job-1");
  job.set_status("running");
  *job.mutable_request() = Job();
  job.mutable_request()->mutable_tasks(0)->set_kind("service");
  auto says = [&](int task, int replicas) { return std::string(CheckScale(job, task, replicas).message()); };
  CHECK(CheckScale(job, 0, 5).ok());
  CHECK(CheckScale(job, 0, 1).ok());  // the count it has: nothing changes, but no error
  CHECK(CheckScale(job, 0, 1000).ok());
  CHECK(says(0, 0) == "replicaNumber: must be 1 to 1000, got 0 (to end the job, stop it)");
  CHECK(says(0, 1001) == "replicaNumber: must be 1 to 1000, got 1001");
  CHECK(says(0, -1) == "replicaNumber: must be 1 to 1000, got -1");
  CHECK(CheckScale(job, 1, 2).code() == absl::StatusCode::kNotFound);
  CHECK(says(1, 2) == "job job-1 has no task 1 (it has 1 task: 0)");
  CHECK(says(-1, 2) == "job job-1 has no task -1 (it has 1 task: 0)");
  job.mutable_request()->mutable_tasks(0)->set_kind("streaming");
  CHECK(CheckScale(job, 0, 2).ok());

  job.mutable_request()->mutable_tasks(0)->set_kind("");
  CHECK(CheckScale(job, 0, 2).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(says(0, 2) == "job job-1 is a batch job: only service and streaming jobs scale (a batch job's replicas are "
                      "fixed when it is submitted)");
  job.mutable_request()->mutable_tasks(0)->set_kind("interactive");
  CHECK(says(0, 2) == "job job-1 is an interactive job: only service and streaming jobs scale (an interactive job has "
                      "one replica)");

  job.mutable_request()->mutable_tasks(0)->set_kind("service");
  job.set_stop_requested(true);
  CHECK(says(0, 2) == "job job-1 is being stopped; it does not scale");
  job.set_status("completed");
  CHECK(says(0, 2) == "job job-1 has already ended (completed); there is nothing to scale");
}

TEST_CASE("a task's named ports: at most 8, names unique and plain, ports 1 to 65535 or 0, a fixed one for one "
          "replica, readiness paths that cannot forge a request [A17][C5]",
          "[A17][C5]") {
  using jc::jobs::ValidateCreate;
  auto with_ports = [](std::vector<std::tuple<std::string, int, std::string>> ports, int replicas = 1) {
    auto job = Job();
    job.mutable_tasks(0)->set_replica_number(replicas);
    for (const auto& [name, port, path] : ports) {
      auto* p = job.mutable_tasks(0)->add_ports();
      p->set_name(name);
      p->set_port(port);
      p->set_readiness_path(path);
    }
    return job;
  };
  auto says = [](const jointcloud::v1::CreateTrainJobRequest& job) { return std::string(ValidateCreate(job).message()); };
  CHECK(ValidateCreate(with_ports({{"http", 0, "/api/status"}, {"metrics", 0, ""}}, 3)).ok());
  CHECK(ValidateCreate(with_ports({{"jupyter", 8888, ""}}, 1)).ok());
  CHECK(says(with_ports({{"http", 0, ""}, {"http", 0, ""}})) == "tasks[0].ports[1].name: \"http\" is named twice");
  CHECK(says(with_ports({{"a", 8000, ""}, {"b", 8000, ""}})) == "tasks[0].ports[1].port: 8000 is asked twice");
  CHECK(says(with_ports({{"http", 70000, ""}})) == "tasks[0].ports[0].port: 1 to 65535 (or 0: the center chooses), got 70000");
  CHECK(says(with_ports({{"http", 8888, ""}}, 2)) ==
        "tasks[0].ports[0].port: a fixed port is for a task of one replica (got 2); leave it 0 and read JC_PORT_HTTP");
  CHECK(says(with_ports({{"HTTP", 0, ""}})).find("tasks[0].ports[0].name: a letter a-z") == 0);
  CHECK(says(with_ports({{"http", 0, "/x\r\nHost: evil"}})).find("tasks[0].ports[0].readinessPath:") == 0);
  std::vector<std::tuple<std::string, int, std::string>> nine;
  for (int i = 0; i < 9; ++i) nine.emplace_back("p" + std::to_string(i), 0, "");
  CHECK(says(with_ports(nine)) == "tasks[0].ports: at most 8 ports a task, got 9");

  // A service with a fixed port does not scale past one replica.
  jointcloud::v1::JobRecord record;
  record.set_job_id("job-1");
  record.set_status("running");
  *record.mutable_request() = with_ports({{"jupyter", 8888, ""}});
  record.mutable_request()->mutable_tasks(0)->set_kind("service");
  CHECK(jc::jobs::CheckScale(record, 0, 2).message() ==
        "task 0 of job job-1 asks for port 8888 (jupyter), which one replica holds: it does not scale past 1");
  CHECK(jc::jobs::CheckScale(record, 0, 1).ok());
}

TEST_CASE("a create's times must be times a record can print: a deadline past 9999-12-31 or before 0001-01-01 (as "
          "gRPC sends it, or as REST's 9999-12-31T23:59:59-01:00 parses) is refused naming the field, where once "
          "it was kept and every list holding the job answered 500 [A16][C5]",
          "[A16][C5]") {
  struct Case {
    int64_t seconds;
    int32_t nanos;
    bool ok;
  };
  for (const Case& c : {Case{1800000000, 0, true}, Case{253402300799, 999999999, true}, Case{-62135596800, 0, true},
                        Case{253402300800, 0, false}, Case{-62135596801, 0, false},
                        Case{INT64_MAX, 0, false}, Case{1800000000, -1, false}, Case{1800000000, 1000000000, false}}) {
    auto job = Job();
    job.mutable_scheduling()->mutable_deadline()->set_seconds(c.seconds);
    job.mutable_scheduling()->mutable_deadline()->set_nanos(c.nanos);
    absl::Status s = jc::jobs::ValidateCreate(job);
    INFO(c.seconds << " " << c.nanos << ": " << s.ToString());
    CHECK(s.ok() == c.ok);
    if (!c.ok) {
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK(std::string(s.message()).rfind("scheduling.deadline: a time between", 0) == 0);
    } else {
      CHECK(jc::store::EncodeDoc(job).ok());  // what is taken prints
    }
  }
}
