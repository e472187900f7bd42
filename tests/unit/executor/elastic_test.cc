// Elastic jobs in the executor's scheduler (SPEC B4, `-n min,max`): golden scenarios of
// when a running job grows, who takes its growth back, and that shrinking comes before
// preemption.

#include <catch2/catch.hpp>

#include "executor/policy/scheduler.h"
#include "tests/unit/executor/scheduler_cycle.h"

using namespace jc::nexec;

namespace {

JobRequest ElasticJob(int64_t id, int min, int max, const std::string& queue = "normal") {
  JobRequest r = testing::MakeJob(id, "u", min, queue, "");
  r.max_slots = max;
  return r;
}

QueueConfig Queue(const std::string& name, int priority = 0) {
  QueueConfig q;
  q.name = name;
  q.priority = priority;
  return q;
}

// Slots a job gained (+) or gave back (-) in `resizes`, by job.
std::map<int64_t, int> Net(const std::vector<Resize>& resizes) {
  std::map<int64_t, int> out;
  for (const Resize& r : resizes) out[r.job_id] += r.grow ? r.allocation.slots : -r.allocation.slots;
  return out;
}

Scheduler TwoHosts(int slots_each, const std::vector<QueueConfig>& queues) {
  Scheduler s;
  for (const char* name : {"h1", "h2"}) {
    HostConfig h;
    h.name = name;
    h.slots = slots_each;
    REQUIRE(s.AddHost(h).ok());
  }
  for (const QueueConfig& q : queues) REQUIRE(s.AddQueue(q).ok());
  return s;
}

}  // namespace

TEST_CASE("an elastic job starts with its minimum and grows toward its maximum, never beyond", "[B4]") {
  Scheduler s = testing::OneHost(8, Queue("normal"));
  auto placed = testing::RunCycle(s, {ElasticJob(1, 2, 6)});
  REQUIRE(placed.size() == 1);
  CHECK(placed[1].sections.at(0).at(0).slots == 2);
  CHECK(s.TakeResizes().empty());  // its tasks start first; it grows from the next cycle
  CHECK(s.free_slots("h1") == 6);

  s.Cycle();
  std::vector<Resize> grown = s.TakeResizes();
  REQUIRE(grown.size() == 1);
  CHECK(grown[0].job_id == 1);
  CHECK(grown[0].grow);
  CHECK(grown[0].allocation.host == "h1");
  CHECK(grown[0].allocation.slots == 4);
  CHECK(s.free_slots("h1") == 2);

  s.Cycle();
  CHECK(s.TakeResizes().empty());  // at its maximum
  CHECK(s.free_slots("h1") == 2);

  // Released, it gives back everything it holds, growth included.
  REQUIRE(s.Release(1).ok());
  CHECK(s.free_slots("h1") == 8);
}

TEST_CASE("a waiting job takes back what an elastic job grew by, newest first, down to its minimum", "[B4]") {
  Scheduler s = TwoHosts(4, {Queue("normal")});
  REQUIRE(testing::RunCycle(s, {ElasticJob(1, 2, 8)}).size() == 1);
  s.Cycle();
  CHECK(Net(s.TakeResizes())[1] == 6);  // all 8 slots of the cluster
  CHECK(s.free_slots("h1") + s.free_slots("h2") == 0);

  // A 5-slot job: the newest growth goes back first, then the next, until it fits.
  auto placed = testing::RunCycle(s, {testing::MakeJob(2, "v", 5, "normal", "")});
  REQUIRE(placed.count(2) == 1);
  std::vector<Resize> back = s.TakeResizes();
  REQUIRE_FALSE(back.empty());
  for (const Resize& r : back) {
    CHECK_FALSE(r.grow);
    CHECK(r.job_id == 1);
    CHECK(r.for_job == 2);
  }
  CHECK(Net(back)[1] == -6);  // both growths: 4 free would not have been enough
  CHECK(s.free_slots("h1") + s.free_slots("h2") == 1);

  // The next cycle grows it into the slot left; once job 2 ends, back to its maximum.
  s.Cycle();
  CHECK(Net(s.TakeResizes())[1] == 1);
  REQUIRE(s.Release(2).ok());
  s.Cycle();
  CHECK(Net(s.TakeResizes())[1] == 5);
  CHECK(s.free_slots("h1") + s.free_slots("h2") == 0);
}

TEST_CASE("an elastic job of a higher queue keeps its growth from a lower queue's job", "[B4]") {
  Scheduler s = testing::OneHost(4, Queue("high", 50));
  REQUIRE(s.AddQueue(Queue("low", 10)).ok());
  REQUIRE(testing::RunCycle(s, {ElasticJob(1, 1, 4, "high")}).size() == 1);
  s.Cycle();
  CHECK(Net(s.TakeResizes())[1] == 3);

  // The low job waits; the high job's growth stays.
  CHECK(testing::RunCycle(s, {testing::MakeJob(2, "v", 2, "low", "")}).empty());
  CHECK(s.TakeResizes().empty());
  // A job of the same queue may take it, and only what it needs: the elastic job keeps
  // the slot left over.
  auto placed = testing::RunCycle(s, {testing::MakeJob(3, "v", 2, "high", "")});
  CHECK(placed.count(3) == 1);
  CHECK(Net(s.TakeResizes())[1] == -2);
  CHECK(s.free_slots("h1") == 0);
}

TEST_CASE("growth goes back before anything is preempted, and preemption frees only the rest", "[B4][B5]") {
  QueueConfig high = Queue("high", 50);
  high.preempt = {"low"};
  Scheduler s = testing::OneHost(4, Queue("low", 10));
  REQUIRE(s.AddQueue(high).ok());
  // L holds 2 slots; the elastic E starts with 1 and grows by the last free one.
  REQUIRE(testing::RunCycle(s, {testing::MakeJob(1, "u", 2, "low", ""), ElasticJob(2, 1, 2, "low")}).size() == 2);
  s.Cycle();
  CHECK(Net(s.TakeResizes())[2] == 1);
  CHECK(s.free_slots("h1") == 0);

  // A 3-slot high job: E's growth goes back (1 slot), and preemption takes the fewest
  // victims for the other 2 — L alone, not E, which keeps its minimum running.
  CHECK(testing::RunCycle(s, {testing::MakeJob(3, "v", 3, "high", "")}).empty());
  std::vector<Resize> back = s.TakeResizes();
  REQUIRE(back.size() == 1);
  CHECK_FALSE(back[0].grow);
  CHECK(back[0].job_id == 2);
  CHECK(back[0].for_job == 3);
  std::vector<Preemption> preemptions = s.TakePreemptions();
  REQUIRE(preemptions.size() == 1);
  CHECK(preemptions[0].victim == 1);

  // The preemptor starts on what was given back and lent; E does not grow into it.
  auto placed = s.Cycle();
  REQUIRE(placed.size() == 1);
  CHECK(placed[0].job_id == 3);
  CHECK(s.TakeResizes().empty());
  CHECK(s.free_slots("h1") == 0);
}

TEST_CASE("a waiting job that would not fit even with every growth back takes nothing", "[B4]") {
  Scheduler s = testing::OneHost(4, Queue("normal"));
  REQUIRE(testing::RunCycle(s, {testing::MakeJob(1, "u", 2, "normal", ""), ElasticJob(2, 1, 2)}).size() == 2);
  s.Cycle();
  CHECK(Net(s.TakeResizes())[2] == 1);
  // Needs 3 of the 4 slots; only 1 can be given back.
  CHECK(testing::RunCycle(s, {testing::MakeJob(3, "v", 3, "normal", "")}).empty());
  CHECK(s.TakeResizes().empty());
  CHECK(s.free_slots("h1") == 0);
}

TEST_CASE("growth stays within the queue's per-user limit", "[B4]") {
  QueueConfig q = Queue("normal");
  q.max_slots_per_user = 3;
  Scheduler s = testing::OneHost(8, q);
  REQUIRE(testing::RunCycle(s, {ElasticJob(1, 1, 8)}).size() == 1);
  s.Cycle();
  CHECK(Net(s.TakeResizes())[1] == 2);
  CHECK(s.free_slots("h1") == 5);
}

TEST_CASE("a restored elastic job gives back what it had grown by", "[B4]") {
  Scheduler s = testing::OneHost(4, Queue("normal"));
  JobRequest e = ElasticJob(1, 1, 4);
  REQUIRE(s.Check(&e).ok());
  // After a master restart: its first allocation and two growths, as its record holds them.
  Placement p;
  p.job_id = 1;
  p.sections = {{HostAllocation{"h1", 1, {}, 0, {}, {}}},
                {HostAllocation{"h1", 2, {}, 0, {}, {}}},
                {HostAllocation{"h1", 1, {}, 0, {}, {}}}};
  REQUIRE(s.Restore(e, p, absl::InfinitePast(), 2).ok());
  CHECK(s.free_slots("h1") == 0);
  auto placed = testing::RunCycle(s, {testing::MakeJob(2, "v", 3, "normal", "")});
  CHECK(placed.count(2) == 1);
  CHECK(Net(s.TakeResizes())[1] == -3);
}

TEST_CASE("elastic requests that cannot be met are refused at submit", "[B4]") {
  Scheduler s = testing::OneHost(8, Queue("normal"));
  JobRequest backwards = ElasticJob(1, 4, 2);
  absl::Status refused = s.Submit(backwards);
  CHECK(absl::IsInvalidArgument(refused));
  CHECK(refused.message() == "-n 4,2: an elastic job's maximum must not be below its minimum");

  JobRequest spanned = testing::MakeJob(2, "u", 2, "normal", "span[hosts=1]");
  spanned.max_slots = 4;
  CHECK(absl::IsInvalidArgument(s.Submit(spanned)));

  JobRequest sections = testing::MakeJob(3, "u", 2, "normal", "1{mem>0} 1{mem>0}");
  sections.max_slots = 4;
  CHECK(absl::IsInvalidArgument(s.Submit(sections)));
  CHECK(s.pending() == 0);
}
