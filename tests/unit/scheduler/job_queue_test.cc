// The federation's queue orders (SPEC A11, A15, A16; issue 45 item 2).
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "services/scheduler/job_queue.h"

namespace {

using jc::scheduler::JobQueue;
using jc::scheduler::QueuedJob;
using jc::scheduler::QueueSettings;

QueueSettings Settings(const std::string& name) {
  auto s = jc::scheduler::ParseQueueSettings(name);
  REQUIRE(s.ok());
  return *s;
}

QueuedJob Job(int64_t seq, const std::string& project, double submitted, double expected, double attained = 0,
              int priority = 0) {
  QueuedJob j;
  j.seq = seq;
  j.project = project;
  j.submitted = submitted;
  j.expected_s = expected;
  j.attained_s = attained;
  j.priority = priority;
  return j;
}

// The order one pass offers the jobs in, placing none.
std::vector<int64_t> Offered(JobQueue& q, double now) {
  std::vector<int64_t> seen;
  q.Pass(now, [&](int64_t seq) {
    seen.push_back(seq);
    return false;
  });
  return seen;
}

// One slot; a long job and a short one at t=0, then a short job every `gap` seconds for two
// days. When does the long job start? (Each finish is followed by one pass.) `long_seq`: the
// long job's submission order (0: before the first short one).
double LongJobStart(QueueSettings s, double long_s, double short_s, double gap, int64_t long_seq = 0) {
  JobQueue q(s);
  std::map<int64_t, double> length = {{long_seq, long_s}, {1, short_s}};
  q.Push(Job(long_seq, "p", 0, long_s));
  q.Push(Job(1, "p", 0, short_s));
  double now = 0, next_arrival = gap;
  int64_t next_seq = 2;
  while (now < 2 * 86400) {
    int64_t chosen = -1;
    q.Pass(now, [&](int64_t seq) {
      if (chosen >= 0) return false;
      chosen = seq;
      return true;
    });
    if (chosen == long_seq) return now;
    const double end = now + (chosen >= 0 ? length[chosen] : gap);
    for (; next_arrival <= end; next_arrival += gap) {
      length[next_seq] = short_s;
      q.Push(Job(next_seq++, "p", next_arrival, short_s));
    }
    now = end;
  }
  return -1;  // starved for two days
}

}  // namespace

TEST_CASE("queue orders are named, and an unknown one is refused with the valid names [A16][C5]", "[A16][C5]") {
  for (const char* name :
       {"fcfs", "fair_share", "sef", "fair_share+sef", "hrrn", "fair_share+hrrn", "las", "fair_share+las"}) {
    auto s = jc::scheduler::ParseQueueSettings(name);
    REQUIRE(s.ok());
    CHECK(s->Name() == name);
  }
  auto bad = jc::scheduler::ParseQueueSettings("shortest");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()) ==
        "unknown queue order \"shortest\" (fcfs, fair_share, sef, fair_share+sef, hrrn, fair_share+hrrn, las, "
        "fair_share+las)");
}

TEST_CASE("shortest expected first offers the shortest job first, a job without an estimate as the default length, "
          "and priority still comes first [A16]",
          "[A16]") {
  JobQueue q(Settings("sef"));
  q.Push(Job(1, "p", 0, 7200));
  q.Push(Job(2, "p", 0, 60));
  q.Push(Job(3, "p", 0, -1));  // no estimate: 1 h
  q.Push(Job(4, "p", 0, 1800));
  q.Push(Job(5, "p", 0, 99999, 0, /*priority=*/5));
  CHECK(Offered(q, 0) == std::vector<int64_t>{5, 2, 4, 3, 1});
  CHECK(q.Explain(3, 600) == "shortest expected first: expected 1h (no estimate: the default), waited 10m");
  // An estimate learned later moves the job.
  q.SetExpected(1, 10);
  CHECK(Offered(q, 0).at(1) == 1);
  // FCFS for the same jobs: submission order.
  JobQueue fcfs(Settings("fcfs"));
  for (int64_t seq : {1, 2, 3}) fcfs.Push(Job(seq, "p", 0, 100.0 / seq));
  CHECK(Offered(fcfs, 0) == std::vector<int64_t>{1, 2, 3});
}

TEST_CASE("a steady stream of short jobs never holds a long one past its bound: aged shortest-expected-first starts "
          "it within a few of its own lengths, pure SEF starves it until the queue's longest wait [A16]",
          "[A16]") {
  // A 2 h job; 10-minute jobs every 5 minutes (twice what the slot can run).
  QueueSettings aged = Settings("sef");
  aged.max_wait_s = 10 * 3600;
  aged.aging = 1;
  const double start = LongJobStart(aged, 7200, 600, 300);
  INFO("aged 1: the long job started at " << start / 3600 << " h");  // 3.7 h when written
  CHECK(start >= 0);
  CHECK(start <= 4 * 3600);  // about 2 x its length here: (7200 - 600) / aging behind an overloaded stream
  // The shipped aging (0.25) lets short jobs pass for longer, still bounded by the aging
  // alone, before the shipped longest wait (24 h): the long job goes ahead once it has waited
  // (7200 - 600) / aging more than the oldest short job, whose submission the overloaded slot
  // reaches at half the clock's pace: about 2 x 26,400 s = 14.7 h.
  QueueSettings shipped = Settings("sef");
  REQUIRE(shipped.aging == jc::scheduler::kDefaultQueueAging);
  REQUIRE(shipped.max_wait_s == 24 * 3600);
  const double shipped_start = LongJobStart(shipped, 7200, 600, 300);
  INFO("aged 0.25: the long job started at " << shipped_start / 3600 << " h");
  CHECK(shipped_start > start);
  CHECK(shipped_start <= 2 * (7200 - 600) / jc::scheduler::kDefaultQueueAging + 1200);
  QueueSettings pure = aged;
  pure.aging = 0;
  const double starved = LongJobStart(pure, 7200, 600, 300);
  INFO("pure SEF: started at " << starved / 3600 << " h");
  CHECK(starved >= 10 * 3600);       // held until the queue's longest wait ...
  CHECK(starved <= 10 * 3600 + 600);  // ... and not a slot later
  pure.max_wait_s = 1e12;
  CHECK(LongJobStart(pure, 7200, 600, 300) < 0);  // without it: never
  // FCFS starts it at once (it came first).
  CHECK(LongJobStart(Settings("fcfs"), 7200, 600, 300) == 0);
}

TEST_CASE("highest response ratio next offers the job whose (wait + expected) / expected is highest: a short job "
          "passes a long one once it has waited a share of its own length, a long one that waited long goes first, "
          "and the longest wait still bounds it [A16]",
          "[A16]") {
  JobQueue q(Settings("hrrn"));
  q.Push(Job(1, "p", 0, 7200));     // a 2 h job, waiting since 0
  q.Push(Job(2, "p", 3000, 600));   // a 10 min job, since 3000 s
  q.Push(Job(3, "p", 3500, -1));    // no estimate: an hour, since 3500 s
  q.Push(Job(4, "p", 3600, 60, 0, /*priority=*/5));
  // At 3600 s: ratios 1.5, 2.0, 1.03; priority first.
  CHECK(Offered(q, 3600) == std::vector<int64_t>{4, 2, 1, 3});
  CHECK(q.Explain(2, 3600) == "highest response ratio next: expected 10m, waited 10m, ratio 2.00");
  CHECK(q.Explain(3, 3600) == "highest response ratio next: expected 1h (no estimate: the default), waited 1m40s, "
                              "ratio 1.03");
  // A moment after the 10-minute job arrived it is behind the 2 h job that waited 50 minutes.
  CHECK(Offered(q, 3060).at(1) == 1);
  // Jobs submitted together start level (submission order); after any wait the shorter leads.
  JobQueue level(Settings("hrrn"));
  level.Push(Job(1, "p", 0, 7200));
  level.Push(Job(2, "p", 0, 60));
  CHECK(Offered(level, 0) == std::vector<int64_t>{1, 2});
  CHECK(Offered(level, 1) == std::vector<int64_t>{2, 1});
  // Under a stream of short jobs twice what the slot can run, the short ones' waits (and
  // ratios) grow faster than the long job's: the queue's longest wait is what bounds it.
  QueueSettings h = Settings("hrrn");
  h.max_wait_s = 10 * 3600;
  const double start = LongJobStart(h, 7200, 600, 300, /*long_seq=*/1'000'000);
  INFO("hrrn: the long job started at " << start / 3600 << " h");
  CHECK(start >= 10 * 3600);
  CHECK(start <= 10 * 3600 + 600);
  // Where the slot keeps up (a 10-minute job every 15 minutes), it starts at the first gap.
  CHECK(LongJobStart(h, 7200, 600, 900, /*long_seq=*/1'000'000) <= 600);
}

TEST_CASE("least attained service puts a job that already ran behind those that ran less, by levels, first come "
          "first served within a level [A16]",
          "[A16]") {
  JobQueue q(Settings("las"));  // levels at 1 h and 10 h of GPU time
  q.Push(Job(1, "p", 0, -1, 50000));  // level 2
  q.Push(Job(2, "p", 0, -1, 4000));   // level 1
  q.Push(Job(3, "p", 0, -1, 0));      // level 0
  q.Push(Job(4, "p", 0, -1, 100));    // level 0, later
  CHECK(Offered(q, 0) == std::vector<int64_t>{3, 4, 2, 1});
  q.AddAttained(3, 3600);  // now level 1, with job 2, which came first
  CHECK(Offered(q, 0) == std::vector<int64_t>{4, 2, 3, 1});
  CHECK(q.Explain(1, 0) == "least attained service: level 2 (50000 GPU-seconds run before), waited 0s");
  // Past the longest wait, a job goes ahead of the order.
  QueueSettings s = Settings("las");
  s.max_wait_s = 3600;
  JobQueue capped(s);
  capped.Push(Job(1, "p", 0, -1, 50000));
  capped.Push(Job(2, "p", 3000, -1, 0));
  CHECK(Offered(capped, 3500) == std::vector<int64_t>{2, 1});
  CHECK(Offered(capped, 3600) == std::vector<int64_t>{1, 2});
  CHECK_THAT(capped.Explain(1, 3600), Catch::StartsWith("waited past the queue's longest wait"));
}

TEST_CASE("fair share composes with shortest expected first: the project holding least goes first, its jobs "
          "shortest first [A15][A16]",
          "[A15][A16]") {
  JobQueue q(Settings("fair_share+sef"));
  jc::scheduler::Resources total;
  total.gpu = 10;
  q.SetCapacity(total);
  jc::scheduler::Resources held;
  held.gpu = 5;
  q.AddHeld("heavy", held);
  q.Push(Job(1, "heavy", 0, 10));
  q.Push(Job(2, "light", 0, 9000));
  q.Push(Job(3, "light", 0, 60));
  q.Push(Job(4, "heavy", 0, 5));
  CHECK(Offered(q, 0) == std::vector<int64_t>{3, 2, 4, 1});
  // Placing: light's shortest goes, its share rises past heavy's, heavy's shortest next.
  std::vector<int64_t> placed;
  q.Pass(0, [&](int64_t seq) {
    placed.push_back(seq);
    if (seq == 3) {
      jc::scheduler::Resources six;
      six.gpu = 6;
      q.AddHeld("light", six);
    }
    return true;
  });
  CHECK(placed == std::vector<int64_t>{3, 4, 1, 2});
  CHECK(q.size() == 0);
}
