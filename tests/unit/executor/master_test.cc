// The master's logic with a fake agent dialer (real store, no processes): event stream
// with resumable cursors, exit codes, kill and requeue, unknown-task cleanup.

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <future>

#include "absl/strings/match.h"
#include "common/store/doc.h"
#include "executor/master/master.h"
#include "tests/testing/faulty_store.h"
#include "tests/testing/process.h"
#include "tests/testing/test_store.h"

using namespace jc::nexec;

namespace {

class FakeDialer final : public AgentDialer {
 public:
  absl::StatusOr<int> Launch(const std::string& address, const pb::LaunchRequest& req) override {
    std::lock_guard<std::mutex> lock(mu);
    launches.push_back(req);
    if (!launch_error.ok()) return launch_error;
    return 1000 + static_cast<int>(launches.size());
  }
  absl::Status Signal(const std::string&, const pb::SignalRequest& req) override {
    std::lock_guard<std::mutex> lock(mu);
    signals.push_back(req);
    return signal_error;
  }
  absl::StatusOr<std::string> ReadLog(const std::string&, const pb::ReadLogRequest&,
                                      int64_t) override {
    return std::string("log");
  }
  std::mutex mu;
  std::vector<pb::LaunchRequest> launches;
  std::vector<pb::SignalRequest> signals;
  absl::Status launch_error;  // every launch answered so (a call that broke: unconfirmed)
  absl::Status signal_error;  // every signal answered so
};

pb::HeartbeatRequest Beat(const std::string& host, std::vector<pb::TaskReport> tasks = {}) {
  pb::HeartbeatRequest b;
  b.mutable_info()->set_host(host);
  b.mutable_info()->set_address(host + ":1");
  b.mutable_info()->set_cpus(4);
  b.mutable_info()->set_mem_mb(8192);
  for (auto& t : tasks) *b.add_tasks() = t;
  return b;
}

pb::TaskReport Running(const pb::LaunchRequest& l) {
  pb::TaskReport r;
  r.set_job_id(l.job_id());
  r.set_attempt(l.attempt());
  r.set_state(pb::TASK_RUNNING);
  r.set_pid(1234);
  return r;
}

pb::TaskReport Exited(const pb::LaunchRequest& l, int code) {
  pb::TaskReport r;
  r.set_job_id(l.job_id());
  r.set_attempt(l.attempt());
  r.set_state(pb::TASK_EXITED);
  r.set_exit_code(code);
  return r;
}

pb::JobSpec Spec(const std::string& command) {
  pb::JobSpec s;
  s.set_command(command);
  s.set_user("alice");
  return s;
}

// Launches run on the master's pool; wait for them.
void WaitLaunches(FakeDialer& d, size_t n) {
  REQUIRE(jc::testing::WaitUntil([&] {
    std::lock_guard<std::mutex> lock(d.mu);
    return d.launches.size() >= n;
  }));
}

}  // namespace

TEST_CASE("the master's event stream follows a job and resumes from a cursor", "[B11]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  auto ok = master.Submit(Spec("true"));
  auto bad = master.Submit(Spec("false"));
  REQUIRE(ok.ok());
  REQUIRE(bad.ok());
  REQUIRE(*master.ScheduleOnce() == 2);
  WaitLaunches(dialer, 2);
  CHECK(dialer.launches[0].hosts(0) == "h1");
  REQUIRE(master.Heartbeat(Beat("h1", {Exited(dialer.launches[0], 0),
                                       Exited(dialer.launches[1], 3)}))
              .ok());
  CHECK(master.GetJob(*ok)->state() == pb::DONE);
  CHECK(master.GetJob(*bad)->state() == pb::EXIT);
  CHECK(master.GetJob(*bad)->exit_code() == 3);

  std::vector<pb::JobEvent> events;
  REQUIRE(master.events().WaitAfter(0, absl::ZeroDuration(), &events) ==
          jc::EventLog<pb::JobEvent>::Read::kOk);
  std::vector<std::pair<int64_t, pb::JobState>> seen;
  for (const auto& e : events) seen.push_back({e.job_id(), e.state()});
  CHECK(seen == std::vector<std::pair<int64_t, pb::JobState>>{{*ok, pb::PENDING},
                                                              {*bad, pb::PENDING},
                                                              {*ok, pb::RUNNING},
                                                              {*bad, pb::RUNNING},
                                                              {*ok, pb::DONE},
                                                              {*bad, pb::EXIT}});
  // A watcher that saw the first four resumes with exactly the last two.
  std::vector<pb::JobEvent> rest;
  master.events().WaitAfter(events[3].cursor(), absl::ZeroDuration(), &rest);
  REQUIRE(rest.size() == 2);
  CHECK(rest[0].state() == pb::DONE);
}

TEST_CASE("kill and requeue act through the agent and stray tasks are killed", "[B11]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  int64_t a = *master.Submit(Spec("sleep 100"));
  int64_t b = *master.Submit(Spec("sleep 100"));
  REQUIRE(*master.ScheduleOnce() == 2);
  WaitLaunches(dialer, 2);

  REQUIRE(master.Kill(a).ok());
  REQUIRE(master.Requeue(b).ok());
  CHECK(dialer.signals.size() == 2);
  CHECK(dialer.signals[0].action() == pb::SignalRequest::KILL);
  // The agent reports both killed.
  REQUIRE(master.Heartbeat(Beat("h1", {Exited(dialer.launches[0], 137),
                                       Exited(dialer.launches[1], 137)}))
              .ok());
  CHECK(master.GetJob(a)->state() == pb::EXIT);
  CHECK(master.GetJob(a)->reason() == "killed by user");
  auto requeued = master.GetJob(b);
  CHECK(requeued->state() == pb::PENDING);
  CHECK(requeued->attempt() == 1);
  REQUIRE(*master.ScheduleOnce() == 1);  // it runs again, as attempt 1
  WaitLaunches(dialer, 3);
  CHECK(dialer.launches[2].attempt() == 1);

  // An agent reporting a task of an old attempt is told to kill it.
  pb::TaskReport stale;
  stale.set_job_id(b);
  stale.set_attempt(0);
  stale.set_state(pb::TASK_RUNNING);
  auto resp = master.Heartbeat(Beat("h1", {stale}));
  REQUIRE(resp.ok());
  REQUIRE(resp->kill_size() == 1);
  CHECK(resp->kill(0).attempt() == 0);

  CHECK(absl::IsFailedPrecondition(master.Kill(a).status()));  // already ended
  CHECK(absl::IsNotFound(master.Kill(999).status()));
  CHECK(absl::IsFailedPrecondition(master.Resume(b).status()));  // running, not suspended
}

TEST_CASE("an agent's heartbeat with only exits leaves its other tasks running and a full one that leaves a task out "
          "takes it as lost",
          "[B11]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  int64_t a = *master.Submit(Spec("true"));
  int64_t b = *master.Submit(Spec("sleep 100"));
  REQUIRE(*master.ScheduleOnce() == 2);
  WaitLaunches(dialer, 2);
  REQUIRE(master.Heartbeat(Beat("h1", {Running(dialer.launches[0]), Running(dialer.launches[1])})).ok());
  CHECK(master.GetJob(b)->state() == pb::RUNNING);

  // Sent at once for a's exit, between the periodic heartbeats: b is not in it.
  pb::HeartbeatRequest exits = Beat("h1", {Exited(dialer.launches[0], 0)});
  exits.set_exits_only(true);
  REQUIRE(master.Heartbeat(exits).ok());
  CHECK(master.GetJob(a)->state() == pb::DONE);
  CHECK(master.GetJob(b)->state() == pb::RUNNING);

  // A full heartbeat without b: the agent lost it (it restarted).
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  CHECK(master.GetJob(b)->state() == pb::EXIT);
}

TEST_CASE("a host that comes back with other resources is scheduled by them", "[B1]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());  // 4 slots
  auto big = Spec("true");
  big.set_slots(6);
  CHECK(absl::IsInvalidArgument(master.Submit(big).status()));
  auto bigger = Beat("h1");
  bigger.mutable_info()->set_cpus(8);
  REQUIRE(master.Heartbeat(bigger).ok());
  auto id = master.Submit(big);
  REQUIRE(id.ok());
  REQUIRE(*master.ScheduleOnce() == 1);
  CHECK(master.GetJob(*id)->tasks(0).slots() == 6);
  CHECK(master.ListHosts()[0].slots() == 8);
}

TEST_CASE("a host's listing holds the memory its running jobs reserve, after a restart too, and frees it when "
          "they end",
          "[B1][B7]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  auto used_mem = [](Master& m) { return m.ListHosts().at(0).used_mem_mb(); };
  pb::LaunchRequest launched;
  {
    Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
    REQUIRE(master.Recover().ok());
    REQUIRE(master.Heartbeat(Beat("h1")).ok());  // 4 slots, 8192 MB
    auto spec = Spec("sleep 100");
    spec.set_slots(3);
    spec.set_requirement("rusage[mem=1000]");  // per slot
    REQUIRE(master.Submit(spec).ok());
    CHECK(used_mem(master) == 0);  // waiting holds nothing
    REQUIRE(*master.ScheduleOnce() == 1);
    WaitLaunches(dialer, 1);
    launched = dialer.launches[0];
    REQUIRE(master.Heartbeat(Beat("h1", {Running(launched)})).ok());
    CHECK(master.ListHosts()[0].used_slots() == 3);
    CHECK(used_mem(master) == 3000);
    // One slot of 6000 MB does not fit in the 5192 MB left: the listing and the scheduler
    // agree on what is held.
    auto big = Spec("true");
    big.set_requirement("rusage[mem=6000]");
    REQUIRE(master.Submit(big).ok());
    CHECK(*master.ScheduleOnce() == 0);
    master.Stop();
  }
  Master again(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(again.Recover().ok());
  REQUIRE(again.Heartbeat(Beat("h1", {Running(launched)})).ok());
  CHECK(again.GetJob(launched.job_id())->state() == pb::RUNNING);
  CHECK(used_mem(again) == 3000);  // restored from the job's requirement
  REQUIRE(again.Heartbeat(Beat("h1", {Exited(launched, 0)})).ok());
  CHECK(again.GetJob(launched.job_id())->state() == pb::DONE);
  CHECK(used_mem(again) == 0);
}

TEST_CASE("a multi-section job's memory is counted by the section each task came from, also after a restart",
          "[B1][B7]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  auto one_slot = [](const std::string& host) {
    auto b = Beat(host);
    b.mutable_info()->set_cpus(1);
    return b;
  };
  // Each host has one slot: the first section's two slots land on two hosts, so the second
  // task is the first section's, not the second's.
  auto by_host = [](Master& m) {
    std::map<double, int> hosts_by_mem;
    for (const auto& h : m.ListHosts()) ++hosts_by_mem[h.used_mem_mb()];
    return hosts_by_mem;
  };
  const std::map<double, int> want = {{100, 2}, {4000, 2}};
  {
    Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
    REQUIRE(master.Recover().ok());
    for (const char* h : {"h1", "h2", "h3", "h4"}) REQUIRE(master.Heartbeat(one_slot(h)).ok());
    auto spec = Spec("sleep 100");
    spec.set_requirement("2{rusage[mem=4000]} 2{rusage[mem=100]}");
    REQUIRE(master.Submit(spec).ok());
    REQUIRE(*master.ScheduleOnce() == 1);
    CHECK(by_host(master) == want);
    master.Stop();
  }
  Master again(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(again.Recover().ok());
  CHECK(by_host(again) == want);
}

TEST_CASE("a task's memory limit is what its job holds on its host, every section's", "[B1][B7]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());  // 4 slots, 8192 MB
  // The native adapter's shape of a GPU spec: a slot with the GPU, the rest without.
  auto spec = Spec("sleep 100");
  spec.set_requirement("1{rusage[mem=1500]} 3{rusage[mem=1000]}");
  REQUIRE(master.Submit(spec).ok());
  REQUIRE(*master.ScheduleOnce() == 1);
  WaitLaunches(dialer, 1);
  CHECK(dialer.launches[0].memory_limit_mb() == 4500);  // the first section's alone gave 1500
}

TEST_CASE("a job killed while its launch is unconfirmed is killed, not left running: the kill stands though its "
          "agent does not run the task, and the next heartbeat without it ends the job instead of launching it again "
          "(attacker helper-60)",
          "[B11][B6]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  dialer.launch_error = absl::UnavailableError("the agent's stream ended before it answered the launches");
  dialer.signal_error = absl::FailedPreconditionError("task 1.0.0 does not run on h1");
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  int64_t id = *master.Submit(Spec("sleep 100"));
  REQUIRE(*master.ScheduleOnce() == 1);
  WaitLaunches(dialer, 1);
  REQUIRE(jc::testing::WaitUntil([&] { return master.GetJob(id)->reason().find("not confirmed") != std::string::npos; }));
  auto killed = master.Kill(id);
  INFO(killed.status().ToString());
  CHECK(killed.ok());
  REQUIRE(master.Heartbeat(Beat("h1")).ok());  // the task is not among what h1 runs
  CHECK(master.GetJob(id)->state() == pb::EXIT);
  CHECK(master.GetJob(id)->exit_code() == 130);
  std::lock_guard<std::mutex> lock(dialer.mu);
  CHECK(dialer.launches.size() == 1);  // not sent again
}

TEST_CASE("bad submissions are refused and nothing is stored", "[B2][C5]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  auto spec = Spec("true");
  spec.set_requirement("select[mem>");
  CHECK(absl::IsInvalidArgument(master.Submit(spec).status()));
  spec = Spec("");
  CHECK(absl::IsInvalidArgument(master.Submit(spec).status()));
  spec = Spec("true");
  spec.set_queue("nope");
  CHECK(absl::IsInvalidArgument(master.Submit(spec).status()));
  spec = Spec("true");
  spec.set_slots(64);  // the cluster has 4
  CHECK(absl::IsInvalidArgument(master.Submit(spec).status()));
  // An environment name no environment can hold (a raw call's, never the CLI's): it would
  // be a second PATH to the task, or none at all.
  for (const std::string& name : {std::string("PATH=/home/u/bin:/usr/bin:/x"), std::string(), std::string("A\0B", 3)}) {
    spec = Spec("true");
    (*spec.mutable_env())[name] = "1";
    auto refused = master.Submit(spec);
    CHECK(absl::IsInvalidArgument(refused.status()));
  }
  spec = Spec("true");
  (*spec.mutable_env())["PATH=/x"] = "1";
  CHECK(master.Submit(spec).status().message() ==
        "environment variable name \"PATH=/x\" holds '=': no environment can hold it");
  // A spec no launch could carry (gRPC's 4 MiB a message): it was accepted, then sent again
  // and again, failing every launch batched with it (attacker helper-60).
  spec = Spec("true");
  for (int i = 0; i < 11; ++i) (*spec.mutable_env())["BIG" + std::to_string(i)] = std::string(100 * 1024, 'x');
  auto too_big = master.Submit(spec);
  CHECK(absl::IsInvalidArgument(too_big.status()));
  CHECK(too_big.status().message().find("at most 1048576") != std::string::npos);
  CHECK(master.ListJobs({}).empty());
  CHECK(store->Query("SELECT id FROM nexec_jobs")->empty());
}

TEST_CASE("a submission answered without a waiting thread is answered once it is stored, and with UNAVAILABLE by "
          "a master that stopped",
          "[B2][B11]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  std::promise<std::pair<absl::StatusOr<int64_t>, size_t>> answered;
  master.SubmitThen(Spec("true"), [&](absl::StatusOr<int64_t> id) {
    // The row is in the store by the time the submitter hears of the job.
    size_t rows = id.ok() ? store->Query("SELECT id FROM nexec_jobs WHERE id = $1", {*id})->size() : 0;
    answered.set_value({std::move(id), rows});
  });
  auto [id, rows] = answered.get_future().get();
  REQUIRE(id.ok());
  CHECK(rows == 1);
  // Refused before the loop: answered at once, nothing stored.
  absl::Status refused;
  master.SubmitThen(Spec(""), [&](absl::StatusOr<int64_t> r) { refused = r.status(); });
  CHECK(absl::IsInvalidArgument(refused));
  master.Stop();
  absl::Status after_stop;
  master.SubmitThen(Spec("true"), [&](absl::StatusOr<int64_t> r) { after_stop = r.status(); });
  CHECK(absl::IsUnavailable(after_stop));
  CHECK(store->Query("SELECT id FROM nexec_jobs")->size() == 1);
}

TEST_CASE("a heartbeat answered without a waiting thread is answered once the ends it reported are stored, and "
          "with UNAVAILABLE by a master that stopped",
          "[B2][B11]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  auto id = master.Submit(Spec("true"));
  REQUIRE(id.ok());
  REQUIRE(*master.ScheduleOnce() == 1);
  WaitLaunches(dialer, 1);
  const pb::HeartbeatRequest beat = Beat("h1", {Exited(dialer.launches[0], 0)});
  std::promise<std::pair<absl::Status, std::string>> answered;
  master.HeartbeatThen(beat, [&](absl::StatusOr<pb::HeartbeatResponse> resp) {
    // The agent forgets the task once answered: by then its end is in the store.
    auto rows = store->Query("SELECT doc FROM nexec_jobs WHERE id = $1", {*id});
    std::string state;
    if (rows.ok() && rows->size() == 1) {
      auto stored = jc::store::DecodeAnyDoc<pb::Job>((*rows)[0][0]);
      if (stored.ok()) state = pb::JobState_Name(stored->state());
    }
    answered.set_value({resp.status(), state});
  });
  auto [status, stored_state] = answered.get_future().get();
  CHECK(status.ok());
  CHECK(stored_state == "DONE");
  // Refused before the loop: answered at once.
  absl::Status refused;
  master.HeartbeatThen(Beat(""), [&](absl::StatusOr<pb::HeartbeatResponse> r) { refused = r.status(); });
  CHECK(absl::IsInvalidArgument(refused));
  master.Stop();
  absl::Status after_stop;
  master.HeartbeatThen(Beat("h1"), [&](absl::StatusOr<pb::HeartbeatResponse> r) { after_stop = r.status(); });
  CHECK(absl::IsUnavailable(after_stop));
}

TEST_CASE("the jobs counted by state and queue follow every change, and a restarted master counts the same",
          "[B8][B11]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  using Counts = std::map<std::pair<std::string, std::string>, int>;
  Counts before_restart;
  {
    Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
    REQUIRE(master.Recover().ok());
    REQUIRE(master.Heartbeat(Beat("h1")).ok());
    std::vector<int64_t> ids;
    for (int i = 0; i < 3; ++i) ids.push_back(*master.Submit(Spec("true")));
    const std::string queue = master.GetJob(ids[0])->spec().queue();
    CHECK(master.JobCounts() == Counts{{{"PENDING", queue}, 3}});
    REQUIRE(*master.ScheduleOnce() == 3);
    WaitLaunches(dialer, 3);
    CHECK(master.JobCounts() == Counts{{{"RUNNING", queue}, 3}});
    REQUIRE(master.Heartbeat(Beat("h1", {Exited(dialer.launches[0], 0), Exited(dialer.launches[1], 3)})).ok());
    REQUIRE(master.Kill(ids[2]).ok());
    REQUIRE(master.Heartbeat(Beat("h1", {Exited(dialer.launches[2], 137)})).ok());
    REQUIRE(master.Submit(Spec("true")).ok());  // a fourth, no cycle since: pending
    before_restart = master.JobCounts();
    int total = 0;
    for (const auto& [key, n] : before_restart) total += n;
    CHECK(total == 4);
    CHECK(before_restart.at({"DONE", queue}) == 1);
    CHECK(before_restart.at({"EXIT", queue}) == 2);
    CHECK(before_restart.at({"PENDING", queue}) == 1);
  }
  Master restarted(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(restarted.Recover().ok());
  CHECK(restarted.JobCounts() == before_restart);
}

TEST_CASE("a restarted master reads back jobs stored as base64 protobuf and those an earlier master stored as JSON",
          "[B11]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  int64_t old_job = 0, new_job = 0;
  {
    Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
    REQUIRE(master.Recover().ok());
    REQUIRE(master.Heartbeat(Beat("h1")).ok());
    auto older = master.Submit(Spec("echo stored-as-json"));
    auto newer = master.Submit(Spec("echo stored-as-protobuf"));
    REQUIRE(older.ok());
    REQUIRE(newer.ok());
    old_job = *older;
    new_job = *newer;
    // The row as a master before this encoding wrote it: the job as protobuf JSON.
    auto job = master.GetJob(old_job);
    REQUIRE(job.ok());
    auto json = jc::store::EncodeDoc(*job);
    REQUIRE(json.ok());
    auto txn = store->Begin();
    REQUIRE(txn.ok());
    REQUIRE((*txn)->Exec("UPDATE nexec_jobs SET doc = $2 WHERE id = $1", {old_job, *json}).ok());
    REQUIRE((*txn)->Commit().ok());
  }
  auto rows = store->Query("SELECT doc FROM nexec_jobs WHERE id = $1", {new_job});
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 1);
  CHECK_FALSE(absl::StartsWith(*(*rows)[0][0], "{"));  // written now: not JSON
  Master restarted(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(restarted.Recover().ok());
  CHECK(restarted.GetJob(old_job)->spec().command() == "echo stored-as-json");
  CHECK(restarted.GetJob(new_job)->spec().command() == "echo stored-as-protobuf");
  CHECK(restarted.ListJobs({}).size() == 2);
}

TEST_CASE("a job pack's submissions are taken in one burst and committed together, each answered in its order",
          "[B2][B11]") {
  jc::testing::FaultyStore store(jc::testing::MakeTestStore());
  FakeDialer dialer;
  Master master(&store, jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Recover().ok());
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  std::vector<pb::JobSpec> specs;
  for (int i = 0; i < 6; ++i) specs.push_back(Spec("echo " + std::to_string(i)));
  specs[2].clear_command();  // refused, alone
  const int before = store.job_commits();
  std::promise<std::vector<absl::StatusOr<int64_t>>> answered;
  master.SubmitAllThen(specs, [&](std::vector<absl::StatusOr<int64_t>> ids) { answered.set_value(std::move(ids)); });
  auto ids = answered.get_future().get();
  REQUIRE(ids.size() == 6);
  CHECK(absl::IsInvalidArgument(ids[2].status()));
  for (int i : {0, 1, 3, 4, 5}) {
    REQUIRE(ids[i].ok());
    CHECK(master.GetJob(*ids[i])->spec().command() == "echo " + std::to_string(i));
    if (i > 0) CHECK(*ids[i] > *ids[i == 3 ? 1 : i - 1]);  // in the pack's order
  }
  CHECK(store.job_commits() == before + 1);  // one commit for the five
}

TEST_CASE("a submission whose commit was made but answered as failed (its outcome unknown) is written again over "
          "itself, and the master goes on",
          "[B11][C7]") {
  // PostgreSQL's store answers a commit whose connection broke before its outcome came as
  // Unavailable; the master retries the burst. The new job's row is there already: an
  // INSERT of it again would fail every retry and stop the master (attacker helper-80).
  jc::testing::FaultyStore store(jc::testing::MakeTestStore());
  FakeDialer dialer;
  Master master(&store, jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Recover().ok());
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  store.CommitInDoubtOnce();
  auto id = master.Submit(Spec("echo in-doubt"));
  REQUIRE(id.ok());  // answered once stored (the process would have exited otherwise)
  CHECK(store.in_doubt_commits() == 1);
  // Stored once, and the job goes on: placed, run, ended, each written.
  REQUIRE(*master.ScheduleOnce() == 1);
  WaitLaunches(dialer, 1);
  REQUIRE(master.Heartbeat(Beat("h1", {Exited(dialer.launches[0], 0)})).ok());
  CHECK(master.GetJob(*id)->state() == pb::DONE);
  auto rows = store.Query("SELECT id FROM nexec_jobs WHERE id = $1", {*id});
  REQUIRE(rows.ok());
  CHECK(rows->size() == 1);
  Master restarted(&store, jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(restarted.Recover().ok());
  CHECK(restarted.GetJob(*id)->state() == pb::DONE);
  CHECK(restarted.GetJob(*id)->spec().command() == "echo in-doubt");
}

TEST_CASE("a submission with a key its submitter used returns the job that key created, also after a restart, "
          "and another submitter's equal key is another key",
          "[B2][B11]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  int64_t first = 0;
  {
    Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
    REQUIRE(master.Recover().ok());
    REQUIRE(master.Heartbeat(Beat("h1")).ok());
    auto spec = Spec("true");
    spec.set_submitter("adapter");  // as the native adapter submits alice's replica
    spec.set_submit_key("jc-a1b2-job-00000001-0-0-0");
    auto id = master.Submit(spec);
    REQUIRE(id.ok());
    first = *id;
    auto again = master.Submit(spec);  // the answer was lost; the client sends it again
    REQUIRE(again.ok());
    CHECK(*again == first);
    // Another submitter's equal key is another key: a job of its own, nothing of alice's
    // (an account cannot take, or block, the adapter's keys).
    auto stranger = spec;
    stranger.set_user("mallory");
    stranger.set_submitter("mallory");
    auto theirs = master.Submit(stranger);
    REQUIRE(theirs.ok());
    CHECK(*theirs != first);
    // The same submitter's key sent again for another user is a collision: refused.
    auto other_user = spec;
    other_user.set_user("bob");
    CHECK(absl::IsAlreadyExists(master.Submit(other_user).status()));
    spec.set_submit_key("jc-a1b2-job-00000002-0-0-0");
    auto other = master.Submit(spec);
    REQUIRE(other.ok());
    CHECK(*other != first);
    CHECK(master.ListJobs({}).size() == 3);
  }
  // A restarted master knows the keys of the jobs it reloads, by submitter.
  Master restarted(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(restarted.Recover().ok());
  auto spec = Spec("true");
  spec.set_submitter("adapter");
  spec.set_submit_key("jc-a1b2-job-00000001-0-0-0");
  auto after = restarted.Submit(spec);
  REQUIRE(after.ok());
  CHECK(*after == first);
  CHECK(restarted.ListJobs({}).size() == 3);
}

TEST_CASE("a queue's run window holds dispatch outside it, suspends its running jobs when it closes and "
          "resumes them when it opens, also after a restart",
          "[B6]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  // Saturday 2026-11-28 12:00 UTC; the window is Monday 8:00 to Friday 18:00.
  const absl::TimeZone utc = absl::UTCTimeZone();
  auto at = [&](int day, int hour, int minute) {
    return absl::FromCivil(absl::CivilMinute(2026, 11, day, hour, minute), utc);
  };
  jc::FakeClock clock(at(28, 12, 0));
  auto config = ParseConfig(R"(
queues:
  - name: day
    run_window: "1:8:0-5:18:0"
)");
  REQUIRE(config.ok());
  MasterOptions options;
  options.time_zone = utc;
  auto master = std::make_unique<Master>(store.get(), &clock, &dialer, *config, options);
  REQUIRE(master->Heartbeat(Beat("h1")).ok());
  int64_t id = *master->Submit(Spec("sleep 1000"));

  // Outside the window: nothing dispatched, and the job and queue say why and until when.
  CHECK(*master->ScheduleOnce() == 0);
  CHECK(master->GetJob(id)->reason() ==
        "queue day is outside its run window (1:8:0-5:18:0); it opens at 2026-11-30 08:00");
  pb::Queue q = master->ListQueues().at(0);
  CHECK_FALSE(q.open());
  CHECK(q.run_window() == "1:8:0-5:18:0");
  CHECK(q.window_changes_at().seconds() == absl::ToUnixSeconds(at(30, 8, 0)));

  // Monday 8:00: it runs.
  clock.Advance(at(30, 8, 0) - clock.Now());
  REQUIRE(*master->ScheduleOnce() == 1);
  WaitLaunches(dialer, 1);
  CHECK(master->GetJob(id)->reason().empty());
  CHECK(*master->CheckRunWindows() == 0);

  // Friday 18:01: the system suspends it, and only the system resumes it.
  clock.Advance(absl::FromCivil(absl::CivilMinute(2026, 12, 4, 18, 1), utc) - clock.Now());
  REQUIRE(*master->CheckRunWindows() == 1);
  auto suspended = master->GetJob(id);
  CHECK(suspended->state() == pb::SUSPENDED);
  CHECK(suspended->system_suspend_reason() == "queue day is outside its run window (1:8:0-5:18:0)");
  CHECK(dialer.signals.back().action() == pb::SignalRequest::SUSPEND);
  auto refused = master->Resume(id);
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("resumes by itself"));
  CHECK(*master->CheckRunWindows() == 0);  // no second suspend

  // A restarted master still knows the system suspended it, and resumes it Monday 8:00.
  master.reset();
  master = std::make_unique<Master>(store.get(), &clock, &dialer, *config, options);
  REQUIRE(master->Recover().ok());
  CHECK(master->GetJob(id)->state() == pb::SUSPENDED);
  CHECK(*master->CheckRunWindows() == 0);
  clock.Advance(absl::FromCivil(absl::CivilMinute(2026, 12, 7, 8, 0), utc) - clock.Now());
  REQUIRE(*master->CheckRunWindows() == 1);
  auto resumed = master->GetJob(id);
  CHECK(resumed->state() == pb::RUNNING);
  CHECK(resumed->system_suspend_reason().empty());
  CHECK(dialer.signals.back().action() == pb::SignalRequest::RESUME);
  REQUIRE(resumed->history_size() == 2);
  CHECK_THAT(resumed->history(0), Catch::Contains("suspended: queue day is outside its run window"));
  CHECK_THAT(resumed->history(1), Catch::Contains("resumed by the system"));

  // A user who suspends a system-suspended job makes it theirs: the window no longer
  // resumes it, the user does.
  clock.Advance(absl::FromCivil(absl::CivilMinute(2026, 12, 11, 19, 0), utc) - clock.Now());
  REQUIRE(*master->CheckRunWindows() == 1);
  REQUIRE(master->Suspend(id).ok());
  CHECK(master->GetJob(id)->system_suspend_reason().empty());
  clock.Advance(absl::FromCivil(absl::CivilMinute(2026, 12, 14, 9, 0), utc) - clock.Now());
  CHECK(*master->CheckRunWindows() == 0);
  CHECK(master->GetJob(id)->state() == pb::SUSPENDED);
  REQUIRE(master->Resume(id).ok());
  CHECK(master->GetJob(id)->state() == pb::RUNNING);
}

TEST_CASE("input goes only to a running interactive job's command", "[B6]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  pb::JobSpec interactive = Spec("cat");
  interactive.set_tty(true);  // a terminal makes it interactive
  int64_t waiting = *master.Submit(interactive);
  CHECK(master.GetJob(waiting)->spec().interactive());
  pb::InputRequest in;
  in.set_job_id(waiting);
  in.set_data("x");
  // Not started: the client is told to try again.
  CHECK(absl::IsUnavailable(master.SendInput(in).status()));

  int64_t batch = *master.Submit(Spec("sleep 100"));
  REQUIRE(*master.ScheduleOnce() == 2);
  WaitLaunches(dialer, 2);
  for (const auto& l : dialer.launches) {
    CHECK(l.interactive() == (l.job_id() == waiting));
    CHECK(l.tty() == (l.job_id() == waiting));
  }
  in.set_job_id(batch);
  auto refused = master.SendInput(in);
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("not interactive"));
  in.set_job_id(waiting);
  in.set_task_index(1);
  CHECK(absl::IsInvalidArgument(master.SendInput(in).status()));
  in.set_job_id(999);
  CHECK(absl::IsNotFound(master.SendInput(in).status()));
}

TEST_CASE("load thresholds: no dispatch above the scheduling one, suspend above the stop one, resume only once "
          "back under the scheduling one, or kill when the queue says so",
          "[B5]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  auto config = ParseConfig(R"(
queues:
  - name: normal
    load_thresholds: {r1m: "2/4"}
  - name: strict
    load_thresholds: {r1m: {stop: 4}}
    threshold_action: kill
)");
  REQUIRE(config.ok());
  Master master(store.get(), jc::RealClock::Get(), &dialer, *config, {});
  auto beat = [&](double load) {
    // Full heartbeats, reporting the job's task once it was launched (as an agent does: a
    // launch accepted and never reported is lost).
    std::vector<pb::TaskReport> tasks;
    {
      std::lock_guard<std::mutex> lock(dialer.mu);
      for (const auto& l : dialer.launches) {
        pb::TaskReport& r = tasks.emplace_back();
        r.set_job_id(l.job_id());
        r.set_attempt(l.attempt());
        r.set_state(pb::TASK_RUNNING);
        r.set_pid(1001);
      }
    }
    pb::HeartbeatRequest b = Beat("h1", tasks);
    b.mutable_info()->set_load_1m(load);
    REQUIRE(master.Heartbeat(b).ok());
  };
  beat(3);
  int64_t id = *master.Submit(Spec("sleep 100"));
  CHECK(*master.ScheduleOnce() == 0);  // 3 is above the scheduling threshold 2
  beat(1);
  REQUIRE(*master.ScheduleOnce() == 1);
  WaitLaunches(dialer, 1);

  beat(5);  // above the stop threshold: suspended, saying why
  REQUIRE(*master.CheckRunWindows() == 1);
  auto stopped = master.GetJob(id);
  CHECK(stopped->state() == pb::SUSPENDED);
  CHECK(stopped->system_suspend_reason() == "r1m 5 on h1 is above queue normal's stop threshold 4");
  CHECK(dialer.signals.back().action() == pb::SignalRequest::SUSPEND);
  beat(3);  // under stop, but still above scheduling: stays stopped
  CHECK(*master.CheckRunWindows() == 0);
  CHECK(master.GetJob(id)->state() == pb::SUSPENDED);
  beat(1);
  REQUIRE(*master.CheckRunWindows() == 1);
  CHECK(master.GetJob(id)->state() == pb::RUNNING);
  CHECK(dialer.signals.back().action() == pb::SignalRequest::RESUME);

  // A queue whose stop action is kill.
  pb::JobSpec strict = Spec("sleep 100");
  strict.set_queue("strict");
  int64_t killed = *master.Submit(strict);
  REQUIRE(*master.ScheduleOnce() == 1);
  REQUIRE(jc::testing::WaitUntil([&] {
    std::lock_guard<std::mutex> lock(dialer.mu);
    return std::any_of(dialer.launches.begin(), dialer.launches.end(),
                       [&](const pb::LaunchRequest& l) { return l.job_id() == killed; });
  }));
  beat(4.5);
  CHECK(*master.CheckRunWindows() == 2);  // job 1 suspended again, the strict one killed
  CHECK(dialer.signals.back().action() == pb::SignalRequest::KILL);
  pb::LaunchRequest strict_launch;
  {
    std::lock_guard<std::mutex> lock(dialer.mu);
    for (const auto& l : dialer.launches) {
      if (l.job_id() == killed) strict_launch = l;
    }
  }
  REQUIRE(master.Heartbeat(Beat("h1", {Exited(strict_launch, 137)})).ok());
  auto ended = master.GetJob(killed);
  CHECK(ended->state() == pb::EXIT);
  CHECK(ended->reason() == "killed: r1m 4.5 on h1 is above queue strict's stop threshold 4");
}

TEST_CASE("a job ended longer ago than the clean period leaves the master's memory and lists, and is still shown, "
          "refused what no longer applies, its key's answer and never given again, also after a restart",
          "[B11][B12]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  jc::FakeClock clock;
  MasterOptions options;
  options.clean_period = absl::Minutes(10);
  auto keyed = [] {
    pb::JobSpec spec = Spec("true");
    spec.set_submitter("adapter");
    spec.set_submit_key("jc-a1b2-job-00000001-0-0-0");
    return spec;
  };
  int64_t old_job = 0, recent_job = 0, rerun_job = 0;
  {
    Master master(store.get(), &clock, &dialer, DefaultConfig(), options);
    REQUIRE(master.Recover().ok());
    REQUIRE(master.Heartbeat(Beat("h1")).ok());
    old_job = *master.Submit(keyed());
    rerun_job = *master.Submit(Spec("true"));
    REQUIRE(*master.ScheduleOnce() == 2);
    WaitLaunches(dialer, 2);
    REQUIRE(master.Heartbeat(Beat("h1", {Exited(dialer.launches[0], 0), Exited(dialer.launches[1], 0)})).ok());
    clock.Advance(absl::Minutes(6));
    recent_job = *master.Submit(Spec("true"));
    REQUIRE(*master.ScheduleOnce() == 1);
    WaitLaunches(dialer, 3);
    REQUIRE(master.Heartbeat(Beat("h1", {Exited(dialer.launches[2], 0)})).ok());
    // Run again after its first end: it is not cleaned by that end's time.
    REQUIRE(master.Rerun(rerun_job).ok());
    CHECK(master.CleanEnded() == 0);  // nothing ended ten minutes ago yet
    CHECK(master.ListJobs({}).size() == 3);

    clock.Advance(absl::Minutes(5));  // the first two ended 11 minutes ago, the third 5
    CHECK(master.CleanEnded() == 1);
    CHECK(master.CleanEnded() == 0);  // once
    std::vector<int64_t> listed;
    for (const pb::Job& j : master.ListJobs({})) listed.push_back(j.id());
    CHECK(listed == std::vector<int64_t>{rerun_job, recent_job});
    const std::string queue = master.GetJob(recent_job)->spec().queue();
    using Counts = std::map<std::pair<std::string, std::string>, int>;
    CHECK(master.JobCounts() == Counts{{{"DONE", queue}, 1}, {{"PENDING", queue}, 1}});
    // Shown from its record, with its end.
    auto shown = master.GetJob(old_job);
    REQUIRE(shown.ok());
    CHECK(shown->state() == pb::DONE);
    CHECK(shown->spec().command() == "true");
    // Its owner (and root) may still read it; another user may not.
    CHECK(master.MayControl({"alice", false}, old_job).ok());
    CHECK(absl::IsPermissionDenied(master.MayControl({"mallory", false}, old_job)));
    CHECK(absl::IsNotFound(master.MayControl({"alice", false}, 9999)));
    // What no longer applies is refused as such, not as an unknown job.
    auto killed = master.Kill(old_job);
    CHECK(absl::IsFailedPrecondition(killed.status()));
    CHECK(absl::StrContains(killed.status().message(), "clean period"));
    CHECK(absl::IsFailedPrecondition(master.Rerun(old_job).status()));
    CHECK(absl::IsFailedPrecondition(master.Suspend(old_job).status()));
    CHECK(absl::IsNotFound(master.Kill(9999).status()));
    // Its output is still read where it ran.
    pb::ReadLogRequest log;
    log.set_job_id(old_job);
    CHECK(master.ReadLog(log, 1024).value_or("") == "log");
    // Its key still answers with it, and only for its user.
    CHECK(master.Submit(keyed()).value_or(0) == old_job);
    auto for_bob = keyed();
    for_bob.set_user("bob");
    CHECK(absl::IsAlreadyExists(master.Submit(for_bob).status()));
  }
  // The store holds it in the history, not among the live jobs a restart reloads.
  CHECK(store->Query("SELECT id FROM nexec_jobs WHERE id = $1", {old_job})->empty());
  CHECK(store->Query("SELECT id FROM nexec_job_history WHERE id = $1", {old_job})->size() == 1);
  Master restarted(store.get(), &clock, &dialer, DefaultConfig(), options);
  REQUIRE(restarted.Recover().ok());
  CHECK(restarted.ListJobs({}).size() == 2);
  CHECK(restarted.GetJob(old_job)->state() == pb::DONE);
  CHECK(restarted.Submit(keyed()).value_or(0) == old_job);
  // The newest job was cleaned: its id is still never given again.
  clock.Advance(absl::Minutes(11));
  REQUIRE(restarted.Kill(rerun_job).ok());  // pending: ends at once
  clock.Advance(absl::Minutes(11));
  CHECK(restarted.CleanEnded() == 2);
  CHECK(restarted.ListJobs({}).empty());
  Master again(store.get(), &clock, &dialer, DefaultConfig(), options);
  REQUIRE(again.Recover().ok());
  CHECK(*again.Submit(Spec("true")) > std::max({old_job, recent_job, rerun_job}));
}

TEST_CASE("fair share counts what jobs cleaned out of memory used, also after a restart", "[B7][B12]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  jc::FakeClock clock;
  MasterOptions options;
  options.clean_period = absl::Minutes(1);
  auto config = ParseConfig("queues:\n  - {name: fs, fairshare: {shares: [{name: default, shares: 1}], half_life: 5h}}\n");
  REQUIRE(config.ok());
  auto usage = [](Master& m) {
    double sum = 0;
    for (const pb::ShareNode& n : m.ListShares("fs")) sum += n.usage_slot_hours();
    return sum;
  };
  {
    Master master(store.get(), &clock, &dialer, *config, options);
    REQUIRE(master.Recover().ok());
    REQUIRE(master.Heartbeat(Beat("h1")).ok());
    REQUIRE(master.Submit(Spec("sleep 3600")).ok());
    REQUIRE(*master.ScheduleOnce() == 1);
    WaitLaunches(dialer, 1);
    clock.Advance(absl::Hours(1));
    REQUIRE(master.Heartbeat(Beat("h1", {Exited(dialer.launches[0], 0)})).ok());
  }
  clock.Advance(absl::Minutes(2));
  // What a restarted master counts from the job's record while it is a live row...
  double from_live_row = 0;
  {
    Master master(store.get(), &clock, &dialer, *config, options);
    REQUIRE(master.Recover().ok());
    from_live_row = usage(master);
    CHECK(from_live_row > 0.5);  // about one slot-hour, decayed
    REQUIRE(master.CleanEnded() == 1);
    CHECK(usage(master) == Approx(from_live_row));  // cleaning forgets nothing of it
  }
  // ... it counts the same from the history once the job was cleaned.
  Master restarted(store.get(), &clock, &dialer, *config, options);
  REQUIRE(restarted.Recover().ok());
  CHECK(restarted.ListJobs({}).empty());
  CHECK(usage(restarted) == Approx(from_live_row));
}

TEST_CASE("one sweep cleans every job past the clean period however many ended together, a bounded commit at a "
          "time",
          "[B12]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  jc::FakeClock clock;
  MasterOptions options;
  options.clean_period = absl::Minutes(1);
  Master master(store.get(), &clock, &dialer, DefaultConfig(), options);
  REQUIRE(master.Recover().ok());
  REQUIRE(master.Heartbeat(Beat("h1")).ok());  // no cycle runs: the jobs stay pending
  constexpr int kJobs = 2500;  // more than one commit's worth
  for (int i = 0; i < kJobs; ++i) {
    auto id = master.Submit(Spec("true"));
    REQUIRE(id.ok());
    REQUIRE(master.Kill(*id).ok());  // pending: it ends at once
  }
  clock.Advance(absl::Minutes(2));
  CHECK(master.CleanEnded() == kJobs);
  CHECK(master.ListJobs({}).empty());
  CHECK(store->Query("SELECT id FROM nexec_jobs")->empty());
  CHECK(store->Query("SELECT id FROM nexec_job_history")->size() == kJobs);
}

TEST_CASE("past --max_ended_jobs the oldest ended jobs leave memory before their clean period is over", "[B12]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  jc::FakeClock clock;
  MasterOptions options;
  options.clean_period = absl::Hours(1);
  options.max_ended_jobs = 3;
  Master master(store.get(), &clock, &dialer, DefaultConfig(), options);
  REQUIRE(master.Recover().ok());
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(*master.Submit(Spec("true")));
    REQUIRE(master.Kill(ids.back()).ok());
    clock.Advance(absl::Seconds(1));  // each ends a second after the one before
  }
  int64_t pending = *master.Submit(Spec("true"));  // not ended: never counted, never cleaned
  CHECK(master.CleanEnded() == 2);
  std::vector<int64_t> listed;
  for (const pb::Job& j : master.ListJobs({})) listed.push_back(j.id());
  CHECK(listed == std::vector<int64_t>{ids[2], ids[3], ids[4], pending});
  CHECK(master.GetJob(ids[0])->state() == pb::EXIT);  // from the history
  CHECK(master.CleanEnded() == 0);
}

TEST_CASE("a kill only if pending takes back a job that waits and leaves one that started as it is, requeued ones "
          "included [A16][B11]",
          "[A16][B11]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  REQUIRE(master.Heartbeat(Beat("h1")).ok());
  // Not scheduled yet: it waits.
  int64_t waiting = *master.Submit(Spec("sleep 100"));
  bool taken_back = false;
  auto taken = master.Kill(waiting, "", /*only_if_pending=*/true, &taken_back);
  REQUIRE(taken.ok());
  CHECK(taken_back);
  CHECK(taken->state() == pb::EXIT);
  CHECK_FALSE(taken->has_started_at());
  // Asked again, it is ended already: not taken back by this call (its owner's kill would
  // not be either).
  CHECK(master.Kill(waiting, "", true, &taken_back).ok());
  CHECK_FALSE(taken_back);
  int64_t owners = *master.Submit(Spec("sleep 100"));
  REQUIRE(master.Kill(owners).ok());  // its owner kills it while it waits
  CHECK(master.Kill(owners, "", true, &taken_back).ok());
  CHECK_FALSE(taken_back);

  int64_t started = *master.Submit(Spec("sleep 100"));
  REQUIRE(*master.ScheduleOnce() == 1);
  WaitLaunches(dialer, 1);
  auto left = master.Kill(started, "", /*only_if_pending=*/true, &taken_back);
  REQUIRE(left.ok());
  CHECK_FALSE(taken_back);
  CHECK(left->state() == pb::RUNNING);
  CHECK(dialer.signals.empty());  // nothing was signalled
  CHECK(master.GetJob(started)->state() == pb::RUNNING);

  // Requeued, it waits again, but it ran: not taken back either.
  REQUIRE(master.Requeue(started).ok());
  REQUIRE(master.Heartbeat(Beat("h1", {Exited(dialer.launches[0], 137)})).ok());
  REQUIRE(master.GetJob(started)->state() == pb::PENDING);
  auto requeued = master.Kill(started, "", /*only_if_pending=*/true);
  REQUIRE(requeued.ok());
  CHECK(requeued->state() == pb::PENDING);
  CHECK(master.GetJob(started)->state() == pb::PENDING);
}

// helper-56: an older agent (before its own --resources check) declared "inf" or 1e300 MB of
// memory and the scheduler counted it; the master refuses the heartbeat where it enters.
TEST_CASE("a heartbeat declaring memory or swap that is negative, not finite or past 1 PiB is refused with why, "
          "and the host does not join [B1]",
          "[B1]") {
  auto store = jc::testing::MakeTestStore();
  FakeDialer dialer;
  Master master(store.get(), jc::RealClock::Get(), &dialer, DefaultConfig(), {});
  for (double mb : {std::numeric_limits<double>::infinity(), std::nan(""), -1.0, 1e300}) {
    pb::HeartbeatRequest mem = Beat("h1");
    mem.mutable_info()->set_mem_mb(mb);
    auto refused = master.Heartbeat(mem);
    CHECK(absl::IsInvalidArgument(refused.status()));
    CHECK(refused.status().message().find("declares mem") != absl::string_view::npos);
    pb::HeartbeatRequest swap = Beat("h1");
    swap.mutable_info()->set_swap_mb(mb);
    CHECK(absl::IsInvalidArgument(master.Heartbeat(swap).status()));
  }
  CHECK(master.ListHosts().empty());
  pb::HeartbeatRequest pib = Beat("h1");
  pib.mutable_info()->set_mem_mb(1024.0 * 1024 * 1024);
  REQUIRE(master.Heartbeat(pib).ok());
  CHECK(master.ListHosts().size() == 1);
}
