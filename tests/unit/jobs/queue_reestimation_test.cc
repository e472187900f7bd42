// Waiting jobs' expected lengths asked again as runs end (SPEC A16, session 68): which jobs
// what was learned concerns, how often, and that the queue ranks by the newer figure from
// then on.

#include <catch2/catch.hpp>

#include "common/timestamp.h"
#include "services/estimator/job_class.h"
#include "services/jobs/queue_reestimation.h"

namespace jc::jobs {
namespace {

constexpr int64_t kT0 = 1'800'000'000;

v1::JobRecord Job(int64_t seq, const std::string& project, const std::string& user, const std::string& name,
                  const std::string& spec) {
  v1::JobRecord r;
  r.set_job_id("job-" + std::to_string(seq));
  r.set_seq(seq);
  auto* req = r.mutable_request();
  req->set_project(project);
  req->set_user_name(user);
  req->set_name(name);
  auto* task = req->add_tasks();
  task->set_name("t");
  task->set_command("python train.py");
  task->set_resource_spec_id(spec);
  *r.mutable_received_at() = ToTimestamp(absl::FromUnixSeconds(kT0 + seq));
  return r;
}

std::vector<std::string> Offered(WaitingQueue& q) {
  std::vector<std::string> out;
  q.ordered().Pass(kT0 + 100, [&](int64_t seq) {
    out.push_back(q.IdOf(seq));
    return false;
  });
  return out;
}

struct Fixture {
  WaitingQueue queue{*scheduler::ParseQueueSettings("sef")};
  estimator::SharedEstimator estimator;
  QueueReestimation reestimation;
  std::map<std::string, v1::JobRecord> jobs;

  Fixture() { REQUIRE(estimator.Reset({}).ok()); }
  void Wait(v1::JobRecord r) {
    queue.Put(r, 0);
    jobs[r.job_id()] = std::move(r);
  }
  // `n` runs of `r`'s class, of `seconds` each.
  void Ran(const v1::JobRecord& r, int n, int seconds) {
    for (int i = 0; i < n; ++i) estimator.Observe(estimator::JobClassOf(r.request(), 0), absl::Seconds(seconds), 1.0);
    reestimation.Learned(r.request());
  }
  int64_t Apply(double at_s) {
    return reestimation.Apply(
        queue,
        [&](const std::string& id) {
          auto it = jobs.find(id);
          return it == jobs.end() ? nullptr : &it->second;
        },
        estimator, absl::Hours(1), absl::FromUnixSeconds(kT0) + absl::Seconds(at_s));
  }
};

TEST_CASE("a waiting job is ranked by what its class learned while it waited: runs of its name put it ahead of a "
          "job limited to 10 min, and what another project or name learned asks nothing of it [A16]",
          "[A16]") {
  Fixture f;
  v1::JobRecord train = Job(1, "vision", "alice", "train", "gpu");  // nothing known: an hour
  v1::JobRecord limited = Job(2, "vision", "alice", "eval", "cpu");
  limited.mutable_request()->mutable_time_limit()->set_seconds(600);
  v1::JobRecord elsewhere = Job(3, "nlp", "bob", "train", "gpu");  // another project's "train"
  elsewhere.mutable_request()->mutable_time_limit()->set_seconds(1200);
  f.Wait(train);
  f.Wait(limited);
  f.Wait(elsewhere);
  CHECK(Offered(f.queue) == std::vector<std::string>{"job-2", "job-3", "job-1"});
  CHECK_FALSE(f.reestimation.pending());
  CHECK(f.Apply(0) == -1);  // nothing learned: nothing asked

  // Two runs of 60 s of alice's "train" end (at another center, say) while job 1 waits.
  f.Ran(train, 2, 60);
  CHECK(f.reestimation.pending());
  // Only job 1 shares a key with them: nlp's "train" and alice's cpu jobs are not asked.
  CHECK(f.Apply(0) == 1);
  CHECK_FALSE(f.reestimation.pending());
  CHECK(Offered(f.queue) == std::vector<std::string>{"job-1", "job-2", "job-3"});
  CHECK_THAT(f.queue.ordered().Explain(1, kT0 + 100), // 60 s, as the sketch keeps it (within its few percent)
             Catch::Matches("shortest expected first: expected (5[5-9]s|1m|1m[0-5]s), waited .*"));
  // Put again (an attempt's end brought its entry up to date): the newer figure stays; its
  // record keeps what was expected at its creation (nothing).
  f.queue.Put(train, 0);
  CHECK(Offered(f.queue) == std::vector<std::string>{"job-1", "job-2", "job-3"});
  CHECK_FALSE(f.jobs["job-1"].has_expected());

  // At most once a second: what is learned half a second later waits for the next.
  f.Ran(train, 3, 7200);  // now its runs say longer
  CHECK(f.Apply(0.5) == -1);
  CHECK(Offered(f.queue)[0] == "job-1");
  CHECK(f.Apply(1.0) == 1);
  CHECK(Offered(f.queue) == std::vector<std::string>{"job-2", "job-3", "job-1"});

  // Out of the queue and back (a retry): its record's figure until asked again.
  f.queue.Remove(1);
  v1::JobRecord stale = train;
  stale.mutable_expected()->set_runs(2);
  stale.mutable_expected()->mutable_median()->set_seconds(60);
  f.jobs["job-1"] = stale;
  f.queue.Put(stale, 0);
  CHECK(Offered(f.queue)[0] == "job-1");
  f.reestimation.WaitsAgain(1);
  CHECK(f.Apply(2.0) == 1);
  CHECK(Offered(f.queue).back() == "job-1");
}

TEST_CASE("a new leadership term asks every waiting job again, once per set of figures, and a job the estimator knows "
          "nothing of goes back to its time limit or the default [A16]",
          "[A16]") {
  Fixture f;
  // 200 waiting jobs of one class, their records saying 2 h (from a term whose history said so).
  for (int64_t seq = 1; seq <= 200; ++seq) {
    v1::JobRecord r = Job(seq, "vision", "alice", "sweep", "gpu");
    r.mutable_expected()->set_runs(4);
    r.mutable_expected()->mutable_median()->set_seconds(7200);
    f.Wait(r);
  }
  v1::JobRecord limited = Job(500, "vision", "carol", "eval", "cpu");
  limited.mutable_request()->mutable_time_limit()->set_seconds(3000);
  limited.mutable_expected()->set_runs(3);
  limited.mutable_expected()->mutable_median()->set_seconds(100);
  f.Wait(limited);
  CHECK(Offered(f.queue).front() == "job-500");
  f.Ran(f.jobs["job-1"], 3, 30);
  f.reestimation = QueueReestimation();
  f.reestimation.All();
  CHECK(f.Apply(0) == 201);
  // The sweep's runs say 30 s now; carol's eval has no history here: its limit, 50 min.
  const auto order = Offered(f.queue);
  CHECK(order.front() == "job-1");
  CHECK(order.back() == "job-500");
  CHECK_THAT(f.queue.ordered().Explain(500, kT0 + 600), Catch::StartsWith("shortest expected first: expected 50m,"));
}

TEST_CASE("a sweep asks at most its bound of estimates a time and goes on the next time where it stopped, so a "
          "backlog of distinct jobs cannot hold the loop [A16]",
          "[A16]") {
  Fixture f;
  f.reestimation = QueueReestimation(/*max_estimates=*/2);
  // Five waiting jobs of one name, each its own command (five sets of figures), recorded at 2 h.
  for (int64_t seq = 1; seq <= 5; ++seq) {
    v1::JobRecord r = Job(seq, "vision", "alice", "sweep", "gpu");
    r.mutable_request()->mutable_tasks(0)->set_command("python sweep.py --trial " + std::to_string(seq));
    r.mutable_expected()->set_runs(4);
    r.mutable_expected()->mutable_median()->set_seconds(7200);
    f.Wait(r);
  }
  f.Ran(f.jobs["job-1"], 3, 30);  // "this name by this user": 30 s for every trial
  CHECK(f.Apply(0) == 2);
  CHECK(f.reestimation.pending());
  // The first two in line were asked; the others keep their records' 2 h for now.
  CHECK_THAT(f.queue.ordered().Explain(2, kT0 + 100), Catch::Matches("shortest expected first: expected (2[89]|3[01])s, .*"));
  CHECK_THAT(f.queue.ordered().Explain(3, kT0 + 100), Catch::StartsWith("shortest expected first: expected 2h,"));
  // Something learned meanwhile waits for the next sweep; this one goes on where it stopped.
  f.Ran(f.jobs["job-1"], 1, 30);
  CHECK(f.Apply(0.5) == -1);
  CHECK(f.Apply(1) == 2);
  CHECK(f.Apply(2) == 1);
  CHECK_THAT(f.queue.ordered().Explain(5, kT0 + 100), Catch::Matches("shortest expected first: expected (2[89]|3[01])s, .*"));
  // Then the next sweep, for what was learned during this one: from the start of the line.
  CHECK(f.reestimation.pending());
  CHECK(f.Apply(3) == 2);
}

TEST_CASE("jobs of the same figures share one estimate, a sweep looks at no more jobs a time than its bound, and what "
          "a user's other jobs of a spec taught asks that user's waiting jobs of the spec [A16]",
          "[A16]") {
  Fixture f;
  f.reestimation = QueueReestimation(/*max_estimates=*/1, /*max_visited=*/3);
  // Four trials of one command (one set of figures), and alice's job of another name at the
  // same spec, recorded at 2 h.
  for (int64_t seq = 1; seq <= 4; ++seq) {
    v1::JobRecord r = Job(seq, "vision", "alice", "sweep", "gpu");
    r.mutable_expected()->set_runs(4);
    r.mutable_expected()->mutable_median()->set_seconds(7200);
    f.Wait(r);
  }
  v1::JobRecord other = Job(5, "vision", "alice", "notebook", "gpu");
  other.mutable_expected()->set_runs(4);
  other.mutable_expected()->mutable_median()->set_seconds(7200);
  f.Wait(other);
  // Her runs of a third name at the spec: "this user's jobs of this spec" learns, and every
  // waiting job of hers at the spec is concerned, though none shares the name.
  f.Ran(Job(99, "vision", "alice", "prep", "gpu"), 3, 40);
  // One estimate a time, yet the first three trials (one set of figures) are all asked; the
  // sweep stops at three jobs looked at.
  CHECK(f.Apply(0) == 3);
  for (int64_t seq : {1, 2, 3}) {
    CHECK_THAT(f.queue.ordered().Explain(seq, kT0 + 100),
               Catch::Matches("shortest expected first: expected (3[89]|4[0-2])s.*"));
  }
  CHECK_THAT(f.queue.ordered().Explain(5, kT0 + 100), Catch::StartsWith("shortest expected first: expected 2h,"));
  // The next time: the fourth trial, then the notebook (another set of figures, the bound's
  // one estimate used up by the trial) the time after.
  CHECK(f.Apply(1) == 1);
  CHECK(f.Apply(2) == 1);
  CHECK_THAT(f.queue.ordered().Explain(5, kT0 + 100), Catch::Matches("shortest expected first: expected (3[89]|4[0-2])s.*"));
  CHECK_FALSE(f.reestimation.pending());
  // Another user's runs at the spec ask nothing of hers.
  f.Ran(Job(98, "vision", "bob", "prep", "gpu"), 3, 40);
  CHECK(f.Apply(3) == 0);
}

}  // namespace
}  // namespace jc::jobs
