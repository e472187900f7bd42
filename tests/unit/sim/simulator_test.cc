// jc-sim's discrete-event core on hand-computed scenarios: the virtual clock, GPU speed,
// data movement, outages with retries, queue order, and the figures (SPEC A15).

#include <catch2/catch.hpp>

#include "tools/sim/metrics.h"
#include "tools/sim/simulator.h"

namespace jc::sim {
namespace {

// Two 4-GPU centers: "fast" (model X, twice the reference speed) listed first, "slow"
// (model Y, the reference speed).
Federation TwoCenters() {
  auto f = ParseFederation(R"(
gpu_models:
  X: {performance: 2, watts: 100}
  Y: {performance: 1, watts: 100}
centers:
  - {id: fast, gpu_model: X, gpus: 4, cpus: 64, memory_gb: 256, price_per_gpu_hour: 4, bandwidth_mbps: 1000, latency_ms: 0}
  - {id: slow, gpu_model: Y, gpus: 4, cpus: 64, memory_gb: 256, price_per_gpu_hour: 1, bandwidth_mbps: 1000, latency_ms: 0}
)");
  REQUIRE(f.ok());
  return *f;
}

TraceJob Job(double submit, double duration, double gpus, std::string project = "p", std::string model = "") {
  TraceJob j;
  j.submit = submit;
  j.duration = duration;
  j.gpus = gpus;
  j.cpus = gpus;
  j.memory_mb = 1024 * gpus;
  j.project = std::move(project);
  j.gpu_model = std::move(model);
  return j;
}

RunResult Run(const Federation& f, const std::vector<TraceJob>& trace, const std::string& policy,
              scheduler::QueueOrder queue = scheduler::QueueOrder::kFcfs) {
  static const PolicyCatalog catalog;
  SimOptions o;
  o.policy = policy;
  o.queue = scheduler::SettingsOf(queue);
  o.keep_jobs = true;
  auto r = Simulate(f, trace, o, catalog);
  REQUIRE(r.ok());
  return *r;
}

TEST_CASE("the virtual clock runs jobs at their center's speed and queues what does not fit [A15]") {
  Federation f = TwoCenters();
  // Each job takes a whole center. 1: fast, 0..50. 2: slow, 10..110. 3: waits for fast, 50..100.
  std::vector<TraceJob> trace = {Job(0, 100, 4), Job(10, 100, 4), Job(20, 100, 4)};
  RunResult r = Run(f, trace, "first_fit");
  REQUIRE(r.jobs.size() == 3);
  CHECK(r.jobs[0].center == "fast");
  CHECK(r.jobs[0].end == Approx(50));
  CHECK(r.jobs[1].center == "slow");
  CHECK(r.jobs[1].end == Approx(110));
  CHECK(r.jobs[2].center == "fast");
  CHECK(r.jobs[2].start == Approx(50));
  CHECK(r.jobs[2].end == Approx(100));
  CHECK(r.metrics.completed == 3);
  CHECK(r.metrics.mean_jct == Approx((50.0 + 100 + 80) / 3));
  CHECK(r.metrics.mean_wait == Approx(10));
  CHECK(r.metrics.makespan == Approx(110));
  // Cost: price x GPUs x hours held. Energy: formula 1 (no data moved): watts x GPUs x run.
  CHECK(r.metrics.cost == Approx((4 * 4 * 50 + 1 * 4 * 100 + 4 * 4 * 50) / 3600.0 + 3 * 4 * 0 /*cpu price*/));
  CHECK(r.metrics.energy_kwh == Approx((100 * 4 * 50 + 10 * 4 * 50 + 100 * 4 * 100 + 10 * 4 * 100 + 100 * 4 * 50 + 10 * 4 * 50) / 3.6e6));
}

TEST_CASE("the scheduler's scorers choose: lowest price sends work to the cheap center [A15][A9]") {
  Federation f = TwoCenters();
  std::vector<TraceJob> trace = {Job(0, 100, 1), Job(0, 100, 1)};
  RunResult cheap = Run(f, trace, "scorer:lowest_price");
  CHECK(cheap.jobs[0].center == "slow");
  CHECK(cheap.jobs[1].center == "slow");
  RunResult fast = Run(f, trace, "scorer:highest_performance");
  CHECK(fast.jobs[0].center == "fast");
  CHECK(fast.metrics.mean_jct == Approx(50));
  CHECK(cheap.metrics.mean_jct == Approx(100));
  CHECK(cheap.metrics.cost < fast.metrics.cost);
}

TEST_CASE("a GPU model constraint keeps a job off other models [A15]") {
  Federation f = TwoCenters();
  RunResult r = Run(f, {Job(0, 100, 1, "p", "Y")}, "scorer:highest_performance");
  CHECK(r.jobs[0].center == "slow");
  RunResult either = Run(f, {Job(0, 100, 1, "p", "Y|X")}, "scorer:highest_performance");
  CHECK(either.jobs[0].center == "fast");
  // A model no center has: the job never runs, and says so.
  f.gpu_models["Z"] = GpuModel{};
  RunResult none = Run(f, {Job(0, 100, 1, "p", "Z")}, "first_fit");
  CHECK(none.metrics.never_ran == 1);
  CHECK(none.jobs[0].start < 0);
}

TEST_CASE("data not at the center moves first and then stays there [A15][A6]") {
  Federation f = TwoCenters();
  f.datasets["d:1"] = SimDataset{"d:1", 1000, false};
  f.centers[0].datasets.push_back("d:1");  // at "fast"
  // Both jobs must run at "slow": 1000 MB at 1000 Mbit/s is 8 s; the second finds it there.
  TraceJob a = Job(0, 100, 1, "p", "Y"), b = Job(200, 100, 1, "p", "Y");
  a.dataset = b.dataset = "d:1";
  a.dataset_mb = b.dataset_mb = 1000;
  RunResult r = Run(f, {a, b}, "first_fit");
  CHECK(r.jobs[0].transfer_s == Approx(8));
  CHECK(r.jobs[0].end == Approx(108));
  CHECK(r.jobs[1].transfer_s == 0);
  CHECK(r.jobs[1].end == Approx(300));
  CHECK(r.metrics.data_moved_gb == Approx(1000.0 / 1024));
  // A private dataset never moves: the job goes where it is, whatever the policy prefers.
  f.datasets["d:1"].is_private = true;
  TraceJob c = Job(0, 100, 1);
  c.dataset = "d:1";
  RunResult p = Run(f, {c}, "scorer:lowest_price");
  CHECK(p.jobs[0].center == "fast");
  CHECK(p.jobs[0].transfer_s == 0);
}

TEST_CASE("a center that fails takes its jobs down, and they are retried elsewhere up to the limit [A15][A8]") {
  Federation f = TwoCenters();
  f.outages.push_back({"fast", 10, 1000});
  RunResult r = Run(f, {Job(0, 100, 1)}, "first_fit");
  CHECK(r.jobs[0].attempts == 2);
  CHECK(r.jobs[0].center == "slow");
  CHECK(r.jobs[0].end == Approx(110));
  CHECK(r.metrics.completed == 1);
  f.retries = 0;
  RunResult gone = Run(f, {Job(0, 100, 1)}, "first_fit");
  CHECK(gone.metrics.failed == 1);
  CHECK(gone.metrics.completed == 0);
  // Recovery: after the outage the center takes work again.
  Federation g = TwoCenters();
  g.outages.push_back({"fast", 0, 50});
  RunResult back = Run(g, {Job(0, 100, 4), Job(1, 100, 4), Job(60, 10, 4)}, "first_fit");
  CHECK(back.jobs[0].center == "slow");
  CHECK(back.jobs[1].start == Approx(50));  // waited for the recovery
  CHECK(back.jobs[1].center == "fast");
}

TEST_CASE("fair share lets a light project past a heavy one's backlog, where FCFS does not [A15][A11]") {
  Federation f = TwoCenters();
  f.centers.pop_back();  // one 4-GPU center
  std::vector<TraceJob> trace;
  for (int i = 0; i < 8; ++i) trace.push_back(Job(0, 100, 1, "heavy", "X"));
  trace.push_back(Job(1, 100, 1, "light", "X"));
  RunResult fcfs = Run(f, trace, "first_fit", scheduler::QueueOrder::kFcfs);
  RunResult fair = Run(f, trace, "first_fit", scheduler::QueueOrder::kFairShare);
  CHECK(fcfs.jobs[8].start == Approx(100));  // behind heavy's second wave (4 GPUs at speed 2: 50 s each)
  CHECK(fair.jobs[8].start == Approx(50));   // first free GPU: light holds nothing
  CHECK(fair.metrics.jain_fairness > fcfs.metrics.jain_fairness);
}

TEST_CASE("a trace naming an unknown GPU model or policy is refused with the reason [A15]") {
  static const PolicyCatalog catalog;
  Federation f = TwoCenters();
  auto r = Simulate(f, {Job(0, 100, 1, "p", "Q100")}, SimOptions{}, catalog);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("unknown GPU model \"Q100\"") != std::string::npos);
  SimOptions o;
  o.policy = "best_fit";
  auto p = Simulate(f, {Job(0, 100, 1)}, o, catalog);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().message().find("unknown policy") != std::string::npos);
  o.policy = "scorer:nope";
  CHECK_FALSE(Simulate(f, {Job(0, 100, 1)}, o, catalog).ok());
}

TEST_CASE("quantiles and Jain's index [A15]") {
  std::vector<double> v = {4, 1, 3, 2};
  CHECK(Quantile(v, 0.5) == Approx(2.5));
  CHECK(Quantile(v, 1) == Approx(4));
  CHECK(JainIndex({1, 1, 1}) == Approx(1));
  CHECK(JainIndex({1, 0, 0, 0}) == Approx(0.25));
}

TEST_CASE("Jain's index is taken over the projects' and over the users' mean slowdown, a user named within its "
          "project [A16]") {
  Federation f = TwoCenters();
  f.centers.erase(f.centers.begin());  // one 4-GPU center at performance 1
  // Three 100 s jobs that each take the whole center, run one after another in submission
  // order: slowdowns 1, 2 and 3. User "a" of project p, "b" of p, and "a" of project q.
  std::vector<TraceJob> trace = {Job(0, 100, 4, "p"), Job(0, 100, 4, "p"), Job(0, 100, 4, "q")};
  trace[0].user = "a";
  trace[1].user = "b";
  trace[2].user = "a";
  RunResult r = Run(f, trace, "first_fit");
  REQUIRE(r.jobs[2].end == Approx(300));
  // Projects: p's mean slowdown 1.5, q's 3: 4.5^2 / (2 x (1.5^2 + 3^2)) = 0.9.
  CHECK(r.metrics.jain_fairness == Approx(0.9));
  // Users: 1, 2, 3 (q's "a" is not p's): 6^2 / (3 x 14).
  CHECK(r.metrics.jain_users == Approx(36.0 / 42));
  // Each user's own figure, and the most slowed user's.
  REQUIRE(r.metrics.user_slowdown.size() == 3);
  CHECK(r.metrics.user_slowdown.at({"p", "a"}) == Approx(1));
  CHECK(r.metrics.user_slowdown.at({"p", "b"}) == Approx(2));
  CHECK(r.metrics.user_slowdown.at({"q", "a"}) == Approx(3));
  CHECK(r.metrics.worst_user_slowdown == Approx(3));
  // Jobs of 100 s are past the 10 s bound: bounded slowdowns are the plain ones.
  CHECK(r.metrics.jain_users_bounded == Approx(36.0 / 42));
  CHECK(r.metrics.worst_user_bounded_slowdown == Approx(3));
}

TEST_CASE("a bounded slowdown counts a job shorter than 10 s as one of 10 s, and never less than 1 [A16]") {
  CHECK(BoundedSlowdown(3600, 2) == Approx(360));  // waited an hour for 2 s: 360, not 1,800
  CHECK(BoundedSlowdown(5, 2) == Approx(1));        // ran at once: 1, not 0.5
  CHECK(BoundedSlowdown(300, 100) == Approx(3));    // past the bound: the plain slowdown
  CHECK(BoundedSlowdown(300, 100, 200) == Approx(1.5));

  // One user's 1 s job waits 1,000 s behind another user's 1,000 s job on a one-GPU center:
  // plain slowdowns 1 and 1,001 (Jain's index ~0.5, as if one user took all the delay);
  // bounded, 1 and 100.1.
  Federation f = TwoCenters();
  f.centers.erase(f.centers.begin());
  std::vector<TraceJob> trace = {Job(0, 1000, 4, "p"), Job(0, 1, 4, "p")};
  trace[0].user = "long";
  trace[1].user = "short";
  RunResult r = Run(f, trace, "first_fit");
  REQUIRE(r.jobs[1].end == Approx(1001));
  CHECK(r.metrics.worst_user_slowdown == Approx(1001));
  CHECK(r.metrics.worst_user_bounded_slowdown == Approx(100.1));
  CHECK(r.metrics.jain_users == Approx(1002.0 * 1002 / (2 * (1 + 1001.0 * 1001))));
  CHECK(r.metrics.jain_users_bounded == Approx(101.1 * 101.1 / (2 * (1 + 100.1 * 100.1))));
}

}  // namespace
}  // namespace jc::sim

namespace jc::sim {
namespace {

TEST_CASE("placement by expected completion holds a job for a faster busy center when it finishes sooner there [A16]") {
  auto f = ParseFederation(R"(
gpu_models:
  X: {performance: 4, watts: 100}
  Y: {performance: 1, watts: 100}
centers:
  - {id: fast, gpu_model: X, gpus: 4, cpus: 64, memory_gb: 256, price_per_gpu_hour: 1, bandwidth_mbps: 1000, latency_ms: 0}
  - {id: slow, gpu_model: Y, gpus: 4, cpus: 64, memory_gb: 256, price_per_gpu_hour: 1, bandwidth_mbps: 1000, latency_ms: 0}
)");
  REQUIRE(f.ok());
  // Nothing has ended before either decision, so both jobs are expected to run the default
  // hour. Job 1 takes the fast center (900 s expected there, 100 s in fact). Job 2, at 10 s:
  // the fast center reports it would start in 890 s (its running job's expected end), and
  // finish by 1,790 s, against 3,600 s starting now on the slow one: it waits, and starts
  // when job 1 ends at 100 s.
  std::vector<TraceJob> trace = {Job(0, 400, 4), Job(10, 4000, 4)};
  for (std::string reports : {"start", "counts"}) {
    INFO("center reports " << reports);
    static const PolicyCatalog catalog;
    SimOptions o;
    o.policy = "scorer:expected_completion";
    o.center_reports = reports;
    o.keep_jobs = true;
    auto r = Simulate(*f, trace, o, catalog);
    REQUIRE(r.ok());
    CHECK(r->jobs[0].center == "fast");
    CHECK(r->jobs[1].center == "fast");
    CHECK(r->jobs[1].start == Approx(100));
    CHECK(r->jobs[1].end == Approx(1100));
  }
  // First fit starts it on the slow center at once: it ends at 4,010 s.
  RunResult ff = Run(*f, trace, "first_fit");
  CHECK(ff.jobs[1].center == "slow");
  CHECK(ff.jobs[1].end == Approx(4010));
  // A policy without the strategy never holds a job: the default profile starts it now.
  RunResult def = Run(*f, trace, "profile:default");
  CHECK(def.jobs[1].start == Approx(10));
  // An unknown center-report mode is refused.
  SimOptions bad;
  bad.center_reports = "guess";
  static const PolicyCatalog catalog;
  CHECK(Simulate(*f, trace, bad, catalog).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace

TEST_CASE("nothing starves: a job larger than any center's free share, past the queue's longest wait, gets a center "
          "that drains for it, where backfill alone hands its GPUs to a stream of small jobs for ever [A16]",
          "[A16]") {
  auto f = ParseFederation(R"(
gpu_models:
  Y: {performance: 1, watts: 100}
centers:
  - {id: only, gpu_model: Y, gpus: 4, cpus: 64, memory_gb: 256, price_per_gpu_hour: 1, bandwidth_mbps: 1000, latency_ms: 0}
)");
  REQUIRE(f.ok());
  // 1-GPU jobs of 100 s every 30 s from t = 0 to 6,000 s keep 3 or 4 GPUs busy at every
  // instant; a 4-GPU job comes at 5 s.
  std::vector<TraceJob> trace;
  for (double t = 0; t <= 6000; t += 30) trace.push_back(Job(t, 100, 1));
  trace.insert(trace.begin() + 1, Job(5, 50, 4));
  static const PolicyCatalog catalog;
  auto run = [&](double max_wait_s) {
    SimOptions o;
    o.policy = "first_fit";
    o.queue = scheduler::SettingsOf(scheduler::QueueOrder::kFcfs);
    o.queue.max_wait_s = max_wait_s;
    o.keep_jobs = true;
    auto r = Simulate(*f, trace, o, catalog);
    REQUIRE(r.ok());
    return r->jobs[1];  // the 4-GPU job
  };
  // Overdue at 605 s: the center drains (the small jobs then running end by 705 s; a new one
  // would end after its expected start, so none starts), and it runs.
  JobRecord drained = run(600);
  INFO("with a drain: started at " << drained.start);
  CHECK(drained.start >= 605);
  CHECK(drained.start <= 605 + 100 + 30);
  // Without it (no longest wait), it waits until the stream is over.
  JobRecord starved = run(1e12);
  INFO("backfill alone: started at " << starved.start);
  CHECK(starved.start >= 6000);
}

TEST_CASE("scarce capacity goes first to the jobs that can use nothing else: a job that needs the fast center's model "
          "starts once the jobs already there end, where without keeps a stream of jobs that run anywhere takes "
          "its GPUs piecemeal [A16]",
          "[A16]") {
  // fast: 4 GPUs of model X at twice the reference speed; slow: 16 of model Y. Same price:
  // the default profile sends jobs that name no model to fast first.
  auto f = ParseFederation(R"(
gpu_models:
  X: {performance: 2, watts: 100}
  Y: {performance: 1, watts: 100}
centers:
  - {id: slow, gpu_model: Y, gpus: 16, cpus: 64, memory_gb: 256, price_per_gpu_hour: 1, bandwidth_mbps: 1000, latency_ms: 0}
  - {id: fast, gpu_model: X, gpus: 4, cpus: 64, memory_gb: 256, price_per_gpu_hour: 1, bandwidth_mbps: 1000, latency_ms: 0}
)");
  REQUIRE(f.ok());
  // 1-GPU jobs of 200 s (100 s at fast) every 20 s until 4,000 s; at 100 s, a job that needs
  // all four X GPUs.
  std::vector<TraceJob> trace;
  for (double t = 0; t <= 4000; t += 20) trace.push_back(Job(t, 200, 1));
  trace.insert(trace.begin() + 6, Job(100, 100, 4, "p", "X"));
  REQUIRE(trace[6].gpu_model == "X");
  static const PolicyCatalog catalog;
  auto run = [&](bool keep) {
    SimOptions o;
    o.queue = scheduler::SettingsOf(scheduler::QueueOrder::kFcfs);
    o.keep_scarce = keep;
    o.keep_jobs = true;
    auto r = Simulate(*f, trace, o, catalog);
    REQUIRE(r.ok());
    return *r;
  };
  RunResult kept = run(true);
  INFO("kept: the X job started at " << kept.jobs[6].start);
  CHECK(kept.jobs[6].center == "fast");
  // What ran at fast when it came ends within 100 s: it starts then.
  CHECK(kept.jobs[6].start <= 100 + 100 + 20);
  // The others still ran at fast whenever nothing waited for it.
  int at_fast = 0;
  for (const auto& j : kept.jobs) at_fast += j.center == "fast";
  CHECK(at_fast > 2);
  RunResult not_kept = run(false);
  INFO("not kept: the X job started at " << not_kept.jobs[6].start);
  CHECK(not_kept.jobs[6].start > 2000);
}

}  // namespace jc::sim
