// Preemption in the executor's scheduler (SPEC B5): golden scenarios of which jobs are
// preempted, how (suspend or requeue), and when they resume.

#include <catch2/catch.hpp>

#include "executor/policy/scheduler.h"
#include "tests/unit/executor/scheduler_cycle.h"

using namespace jc::nexec;

namespace {

// One host; queues low (priority 10) and high (priority 50, preempting low).
Scheduler TwoQueues(int slots, int gpus, int low_max_preemptions = 0) {
  Scheduler s;
  HostConfig h;
  h.name = "h1";
  h.slots = slots;
  h.mem_mb = 65536;
  for (int g = 0; g < gpus; ++g) h.gpus.push_back(g);
  REQUIRE(s.AddHost(h).ok());
  QueueConfig low;
  low.name = "low";
  low.priority = 10;
  low.max_preemptions = low_max_preemptions;
  REQUIRE(s.AddQueue(low).ok());
  QueueConfig high;
  high.name = "high";
  high.priority = 50;
  high.preempt = {"low"};
  REQUIRE(s.AddQueue(high).ok());
  return s;
}

std::vector<int64_t> Victims(const std::vector<Preemption>& preemptions) {
  std::vector<int64_t> out;
  for (const auto& p : preemptions) out.push_back(p.victim);
  return out;
}

}  // namespace

TEST_CASE("priority preemption suspends the youngest job of the lower queue and resumes it when its slots are free",
          "[B5]") {
  Scheduler s = TwoQueues(4, 0);
  auto first = testing::RunCycle(s, {testing::MakeJob(1, "u", 2, "low", ""), testing::MakeJob(2, "u", 2, "low", "")});
  REQUIRE(first.size() == 2);
  CHECK(s.free_slots("h1") == 0);

  // The high job does not fit: job 2 (the youngest) is chosen and lends its 2 slots.
  auto none = testing::RunCycle(s, {testing::MakeJob(3, "v", 2, "high", "")});
  CHECK(none.empty());
  auto preemptions = s.TakePreemptions();
  REQUIRE(preemptions.size() == 1);
  CHECK(preemptions[0].victim == 2);
  CHECK(preemptions[0].preemptor == 3);
  CHECK_FALSE(preemptions[0].requeue);
  CHECK(preemptions[0].reason == "preempted by job 3 (queue high)");
  CHECK(s.PendingReason(3) == "preempting job 2");
  CHECK(s.free_slots("h1") == 2);
  CHECK(s.TakeResumes().empty());  // the slots are promised to job 3

  // The next cycle starts the preemptor on the lent slots; nothing resumes meanwhile.
  auto placed = s.Cycle();
  REQUIRE(placed.size() == 1);
  CHECK(placed[0].job_id == 3);
  CHECK(s.TakeResumes().empty());
  CHECK(s.TakePreemptions().empty());

  // The preemptor ends: job 2 takes its slots back before anything else of its queue.
  REQUIRE(s.Submit(testing::MakeJob(4, "u", 2, "low", "")).ok());
  REQUIRE(s.Release(3).ok());
  CHECK(s.Cycle().empty());  // job 4 waits: the slots went back to job 2
  CHECK(s.TakeResumes() == std::vector<int64_t>{2});
  CHECK(s.free_slots("h1") == 0);
}

TEST_CASE("preemption takes the fewest victims, and none when preempting cannot make room", "[B5]") {
  Scheduler s = TwoQueues(4, 0);
  std::vector<JobRequest> low;
  for (int i = 1; i <= 4; ++i) low.push_back(testing::MakeJob(i, "u", 1, "low", ""));
  REQUIRE(testing::RunCycle(s, low).size() == 4);
  CHECK(testing::RunCycle(s, {testing::MakeJob(10, "v", 2, "high", "")}).empty());
  CHECK(Victims(s.TakePreemptions()) == std::vector<int64_t>{4, 3});

  // A job larger than the host: no preemption at all.
  Scheduler t = TwoQueues(4, 0);
  REQUIRE(testing::RunCycle(t, low).size() == 4);
  JobRequest huge = testing::MakeJob(11, "v", 2, "high", "rusage[mem=40000]");  // 80 GB on a 64 GB host
  CHECK(testing::RunCycle(t, {huge}).empty());
  CHECK(t.TakePreemptions().empty());
}

TEST_CASE("a job holding GPUs is requeued, not suspended, and its preemptor waits for the GPUs", "[B5]") {
  Scheduler s = TwoQueues(8, 2);
  REQUIRE(testing::RunCycle(s, {testing::MakeJob(1, "u", 2, "low", "rusage[gpu=1]")}).size() == 1);
  CHECK(testing::RunCycle(s, {testing::MakeJob(2, "v", 1, "high", "rusage[gpu=1]")}).empty());
  auto preemptions = s.TakePreemptions();
  REQUIRE(preemptions.size() == 1);
  CHECK(preemptions[0].victim == 1);
  CHECK(preemptions[0].requeue);
  // Until the victim is released (its processes ended) the GPUs are held: the
  // preemptor waits, and preempts nothing more.
  CHECK(s.Cycle().empty());
  CHECK(s.TakePreemptions().empty());
  CHECK(s.PendingReason(2) == "waiting for preempted job 1 to end");
  REQUIRE(s.Release(1).ok());
  auto placed = s.Cycle();
  REQUIRE(placed.size() == 1);
  CHECK(placed[0].job_id == 2);
}

TEST_CASE("a job is never preempted more than its queue's max_preemptions", "[B5]") {
  Scheduler s = TwoQueues(2, 0, /*low_max_preemptions=*/1);
  JobRequest once = testing::MakeJob(1, "u", 2, "low", "");
  once.preemptions = 1;  // preempted before
  REQUIRE(testing::RunCycle(s, {once}).size() == 1);
  CHECK(testing::RunCycle(s, {testing::MakeJob(2, "v", 2, "high", "")}).empty());
  CHECK(s.TakePreemptions().empty());
}

TEST_CASE("a preempted job whose preemptor was cancelled resumes, and a failed suspension takes its slots back", "[B5]") {
  Scheduler s = TwoQueues(2, 0);
  REQUIRE(testing::RunCycle(s, {testing::MakeJob(1, "u", 2, "low", "")}).size() == 1);
  CHECK(testing::RunCycle(s, {testing::MakeJob(2, "v", 2, "high", "")}).empty());
  REQUIRE(s.TakePreemptions().size() == 1);
  REQUIRE(s.Cancel(2).ok());
  CHECK(s.Cycle().empty());
  CHECK(s.TakeResumes() == std::vector<int64_t>{1});

  CHECK(testing::RunCycle(s, {testing::MakeJob(3, "v", 2, "high", "")}).empty());
  REQUIRE(s.TakePreemptions().size() == 1);
  REQUIRE(s.CancelPreemption(1).ok());
  CHECK(s.free_slots("h1") == 0);
  CHECK(s.Cycle().empty());
  CHECK(s.TakeResumes().empty());
  // ... and the preemptor tries again.
  CHECK(Victims(s.TakePreemptions()) == std::vector<int64_t>{1});
}
