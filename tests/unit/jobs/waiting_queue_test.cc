// The job manager's one waiting queue (SPEC A11, A16): kept in memory and updated in place —
// who is first in line, the queue order's view, and what changes a job's place.

#include <catch2/catch.hpp>

#include "common/timestamp.h"
#include "services/jobs/waiting_queue.h"

namespace jc::jobs {
namespace {

v1::JobRecord Record(int64_t seq, const std::string& project, int priority = 0) {
  v1::JobRecord r;
  r.set_job_id("job-" + std::to_string(seq));
  r.set_seq(seq);
  r.mutable_request()->set_project(project);
  r.mutable_request()->mutable_scheduling()->set_priority(priority);
  *r.mutable_received_at() = ToTimestamp(absl::FromUnixSeconds(1'800'000'000 + seq));
  return r;
}

// The job ids in the order a pass offers them (placing none).
std::vector<std::string> Offered(WaitingQueue& q, double now = 1'800'000'100) {
  std::vector<std::string> out;
  q.ordered().Pass(now, [&](int64_t seq) {
    out.push_back(q.IdOf(seq));
    return false;
  });
  return out;
}

TEST_CASE("the waiting queue is one queue updated in place: in line by priority then submission, offered in the "
          "queue order, a job out once placed or ended [A11][A16]",
          "[A11][A16]") {
  WaitingQueue q(*scheduler::ParseQueueSettings("fcfs"));
  q.SetPriorityGrants({{"b", 10}, {"x", 10}});  // what their quotas let them ask
  CHECK(q.empty());
  CHECK(q.FirstInLine(Record(1, "x", 0)));
  q.Put(Record(2, "a"), 0);
  q.Put(Record(3, "b"), 0);
  q.Put(Record(4, "b", /*priority=*/5), 0);
  CHECK(q.size() == 3);
  // A job submitted now is first in line only ahead of everyone waiting.
  CHECK_FALSE(q.FirstInLine(Record(9, "x", 0)));
  CHECK(q.FirstInLine(Record(9, "x", 6)));
  CHECK(Offered(q) == std::vector<std::string>{"job-4", "job-2", "job-3"});
  // Put again (a replica waits again): still one entry.
  q.Put(Record(2, "a"), 0);
  CHECK(q.size() == 3);
  q.Remove(Record(4, "b", 5));
  CHECK_FALSE(q.Contains(Record(4, "b", 5)));
  CHECK(q.FirstInLine(Record(1, "x", 0)));
  CHECK(Offered(q) == std::vector<std::string>{"job-2", "job-3"});
  q.Remove(Record(77, "x"));  // not there: nothing
  CHECK(q.size() == 2);
  // A pass that places a job takes it out of both views.
  q.ordered().Pass(1'800'000'100, [&](int64_t seq) {
    if (q.IdOf(seq) != "job-2") return false;
    q.Remove(seq);
    return true;
  });
  CHECK(q.size() == 1);
  CHECK(Offered(q) == std::vector<std::string>{"job-3"});
  q.Clear();
  CHECK(q.empty());
  CHECK(Offered(q).empty());
}

TEST_CASE("the waiting queue brings a job's entry up to date in place: more attained service puts it behind under "
          "las, and sef ranks by history or the time limit, never the job's own estimate [A16]",
          "[A16]") {
  WaitingQueue las(*scheduler::ParseQueueSettings("las"));
  las.Put(Record(1, "a"), 0);
  las.Put(Record(2, "a"), 10);
  CHECK(Offered(las) == std::vector<std::string>{"job-1", "job-2"});
  las.Put(Record(1, "a"), 7200);  // an attempt of it ran: past the first level (an hour)
  CHECK(Offered(las) == std::vector<std::string>{"job-2", "job-1"});

  WaitingQueue sef(*scheduler::ParseQueueSettings("sef"));
  v1::JobRecord says_short = Record(1, "a");
  says_short.mutable_request()->mutable_estimated_duration()->set_seconds(1);  // unenforced
  v1::JobRecord limited = Record(2, "a");
  limited.mutable_request()->mutable_time_limit()->set_seconds(30);  // enforced
  v1::JobRecord learned = Record(3, "a");
  learned.mutable_expected()->set_runs(3);
  learned.mutable_expected()->mutable_median()->set_seconds(60);
  sef.Put(says_short, 0);
  sef.Put(limited, 0);
  sef.Put(learned, 0);
  // 30 s by its limit, 60 s by history, then the one that only says "1s" (the default hour).
  CHECK(Offered(sef, 1'800'000'003) == std::vector<std::string>{"job-2", "job-3", "job-1"});
}

TEST_CASE("sef ranks a one-off by what is assumed of it, not its median, and says so, and a record written before "
          "`assumed` existed by its median [A16]",
          "[A16]") {
  WaitingQueue sef(*scheduler::ParseQueueSettings("sef"));
  v1::JobRecord known = Record(1, "a");  // its own name's runs: 20 min
  known.mutable_expected()->set_runs(5);
  known.mutable_expected()->mutable_median()->set_seconds(1200);
  known.mutable_expected()->mutable_assumed()->set_seconds(1200);
  v1::JobRecord one_off = Record(2, "a");  // the user's other jobs: 10 min median, assumed 40 min
  one_off.mutable_expected()->set_runs(40);
  one_off.mutable_expected()->mutable_median()->set_seconds(600);
  one_off.mutable_expected()->mutable_assumed()->set_seconds(2400);
  v1::JobRecord old = Record(3, "a");  // written before assumed: 30 min, between the two
  old.mutable_expected()->set_runs(3);
  old.mutable_expected()->mutable_median()->set_seconds(1800);
  sef.Put(one_off, 0);
  sef.Put(known, 0);
  sef.Put(old, 0);
  CHECK(Offered(sef, 1'800'000'003) == std::vector<std::string>{"job-1", "job-3", "job-2"});
  CHECK_THAT(sef.ordered().Explain(2, 1'800'000'003),
             Catch::StartsWith("shortest expected first: expected 40m (a one-off: between its median and p90)"));
  CHECK_THAT(sef.ordered().Explain(1, 1'800'000'003), Catch::StartsWith("shortest expected first: expected 20m, waited"));
}

// Attacker's review, session 34: under FCFS a service submitted long ago jumped the queue
// each time it grew (its new replicas had its old place in line).
TEST_CASE("a service's replica added by a scale or restarting queues from when it fell due, behind what was "
          "submitted before [A17][A11]",
          "[A17][A11]") {
  WaitingQueue q(*scheduler::ParseQueueSettings("fcfs"));
  v1::JobRecord service = Record(1, "a");  // submitted first
  v1::JobRecord batch = Record(5, "b");    // submitted 4 s after it, waiting
  q.Put(batch, 0);
  // The service grows 50 s after its submission: its new replica waits from then.
  auto* added = service.add_replicas();
  added->set_state(v1::ReplicaRecord::WAITING);
  *added->mutable_restart_after() = ToTimestamp(absl::FromUnixSeconds(1'800'000'051));
  q.Put(service, 0);
  REQUIRE(q.in_line().size() == 2);
  CHECK(std::get<3>(*q.in_line().begin()) == "job-5");
  CHECK_FALSE(q.FirstInLine(service));
  // Put again with its place moved (placed, then waiting again): still one entry.
  *added->mutable_restart_after() = ToTimestamp(absl::FromUnixSeconds(1'800'000'002));
  q.Put(service, 0);
  CHECK(q.size() == 2);
  CHECK(std::get<3>(*q.in_line().begin()) == "job-1");
  CHECK(q.Contains(service));
}

// helper-69 (session 68): a create is checked against its project's grant, but a record
// admitted before grants existed, or before one was lowered (a service scaled since), kept
// its priority above every other project's job.
TEST_CASE("a job is ranked no higher than its project's grant: above it at the grant, none above 0 before grants are "
          "read, an admin's job without a project at its own, and lowering one's own is anyone's [C6][A11]",
          "[C6][A11]") {
  WaitingQueue q(*scheduler::ParseQueueSettings("fcfs"));
  v1::JobRecord old_high = Record(1, "vision", 1000000);  // admitted before grants existed
  v1::JobRecord nlp = Record(2, "nlp", 5);                // granted 5
  v1::JobRecord admin = Record(3, "", 7);                 // an admin's, no project
  v1::JobRecord nice = Record(4, "vision", -2);
  v1::JobRecord plain = Record(5, "nlp", 0);
  // Before the grants are read: nothing above 0 but the admin's.
  for (const auto& r : {old_high, nlp, admin, nice, plain}) q.Put(r, 0);
  CHECK(q.PriorityOf(old_high.request()) == 0);
  CHECK(Offered(q) == std::vector<std::string>{"job-3", "job-1", "job-2", "job-5", "job-4"});
  // vision has no grant, nlp 5: the old record is ranked at 0, nlp's at 5.
  REQUIRE(q.SetPriorityGrants({{"nlp", 5}}));
  CHECK_FALSE(q.SetPriorityGrants({{"nlp", 5}}));  // unchanged: nothing to put again
  for (const auto& r : {old_high, nlp}) q.Put(r, 0);
  CHECK(Offered(q) == std::vector<std::string>{"job-3", "job-2", "job-1", "job-5", "job-4"});
  CHECK_FALSE(q.FirstInLine(Record(9, "vision", 1000000)));
  CHECK(q.FirstInLine(Record(9, "nlp", 6)) == false);  // ranked at 5, behind the admin's 7
  // vision is granted 10: its old record ranks at 10, first but for nothing.
  REQUIRE(q.SetPriorityGrants({{"nlp", 5}, {"vision", 10}}));
  q.Put(old_high, 0);
  CHECK(Offered(q).front() == "job-1");
  CHECK(std::get<0>(*q.in_line().begin()) == -10);
}

}  // namespace
}  // namespace jc::jobs
