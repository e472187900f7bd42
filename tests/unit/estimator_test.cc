// The duration estimator (SPEC A16, issue 45): what a user sees in a plan's explanation and
// what queue orders and completion-time placement will rest on.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "services/estimator/duration_estimator.h"

namespace {

using jc::estimator::DurationEstimator;
using jc::estimator::DurationSketch;
using jc::estimator::JobClass;

JobClass Train(const std::string& digest = "cmd-1") { return {"vision", "alice", "resnet", digest, "gpu-1"}; }

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

TEST_CASE("a duration sketch's quantiles are within 5% of the true run times of a heavy-tailed history [A16]", "[A16]") {
  std::mt19937 rng(7);
  std::lognormal_distribution<double> durations(std::log(1800.0), 1.5);  // Philly-like: minutes to days
  std::vector<double> runs;
  DurationSketch sketch;
  for (int i = 0; i < 5000; ++i) {
    runs.push_back(durations(rng));
    sketch.Add(runs.back(), 1.0);  // no decay: every run weighs the same
  }
  std::sort(runs.begin(), runs.end());
  for (double q : {0.1, 0.5, 0.9, 0.99}) {
    const double truth = runs[static_cast<size_t>(q * (runs.size() - 1))];
    INFO("q=" << q << " truth=" << truth << " sketch=" << sketch.Quantile(q));
    CHECK(std::abs(sketch.Quantile(q) - truth) <= 0.06 * truth);
  }
  CHECK(sketch.runs() == 5000);
  auto back = DurationSketch::Decode(sketch.Encode());
  REQUIRE(back.ok());
  CHECK(back->Quantile(0.5) == sketch.Quantile(0.5));
  CHECK(back->runs() == 5000);
  for (const char* bad : {"", "x;1:2", "3;1:x", "3;-1:2", "3;1:-2", "3;1:nan"}) {
    INFO(bad);
    CHECK_FALSE(DurationSketch::Decode(bad).ok());
  }
}

TEST_CASE("an estimate comes from the most specific history with runs, says which, and scales with the center's "
          "performance [A16]",
          "[A16]") {
  DurationEstimator e;
  // alice's resnet ran 40 min at a reference center, 5 times, and 20 min at one twice as fast.
  for (int i = 0; i < 5; ++i) e.Observe(Train(), absl::Minutes(40), 1.0);
  for (int i = 0; i < 5; ++i) e.Observe(Train(), absl::Minutes(20), 2.0);
  auto same = e.Estimate(Train(), 1.0);
  REQUIRE(same.has_value());
  CHECK(std::abs(Seconds(same->median) - 2400) <= 0.06 * 2400);
  CHECK(same->runs == 10);
  // (the sketch's bucket for 40 min is said as 39 min: within its 5%)
  CHECK_THAT(same->basis, Catch::Matches("median of 10 runs of this command of this name by this user: (38|39|40|41|42) min"));
  // At a center four times as fast: a quarter.
  auto fast = e.Estimate(Train(), 4.0);
  REQUIRE(fast.has_value());
  CHECK(std::abs(Seconds(fast->median) - 600) <= 0.06 * 600);
  // Another command under the same name: the name's history answers, and says so.
  auto other = e.Estimate(Train("cmd-2"), 1.0);
  REQUIRE(other.has_value());
  CHECK_THAT(other->basis, Catch::StartsWith("median of 10 runs of this name by this user"));
  // bob's resnet in the same project: the project's history of the name.
  JobClass bob = Train();
  bob.user = "bob";
  auto project = e.Estimate(bob, 1.0);
  REQUIRE(project.has_value());
  CHECK_THAT(project->basis, Catch::StartsWith("median of 10 runs of this name in this project"));
  // A job nobody ran: the user's own estimate, else its time limit, else none (placed as today).
  JobClass fresh{"nlp", "carol", "bert", "d", "gpu-1"};
  CHECK_FALSE(e.Estimate(fresh, 1.0).has_value());
  auto own = e.Estimate(fresh, 1.0, absl::Hours(2));
  REQUIRE(own.has_value());
  CHECK(own->basis == "the job's own estimate: 2.0 h");
  CHECK(own->runs == 0);
  auto limit = e.Estimate(fresh, 1.0, std::nullopt, absl::Hours(4));
  REQUIRE(limit.has_value());
  CHECK(limit->basis == "its time limit (an upper bound): 4.0 h");
  // One run is not a history (min_runs 2): the user's figure is used instead.
  e.Observe(fresh, absl::Minutes(5), 1.0);
  CHECK(e.Estimate(fresh, 1.0, absl::Hours(2))->basis == "the job's own estimate: 2.0 h");
  e.Observe(fresh, absl::Minutes(5), 1.0);
  CHECK_THAT(e.Estimate(fresh, 1.0, absl::Hours(2))->basis, Catch::StartsWith("median of 2 runs"));
}

TEST_CASE("a job that got faster is believed within a few dozen runs, and the uncertainty shows the spread [A16]",
          "[A16]") {
  DurationEstimator e;
  for (int i = 0; i < 100; ++i) e.Observe(Train(), absl::Minutes(100), 1.0);
  for (int i = 0; i < 40; ++i) e.Observe(Train(), absl::Minutes(10), 1.0);
  auto now = e.Estimate(Train(), 1.0);
  REQUIRE(now.has_value());
  CHECK(std::abs(Seconds(now->median) - 600) <= 0.06 * 600);
  // Mixed history: the 90th percentile is far above the median.
  DurationEstimator mixed;
  for (int i = 0; i < 50; ++i) mixed.Observe(Train(), i % 5 == 0 ? absl::Hours(10) : absl::Minutes(30), 1.0);
  auto m = mixed.Estimate(Train(), 1.0);
  REQUIRE(m.has_value());
  CHECK(Seconds(m->p90) > 10 * Seconds(m->median));
}

TEST_CASE("the estimator keeps at most its bound of keys, dropping the least recently run, and its rows load back "
          "after a restart [A16]",
          "[A16]") {
  jc::estimator::EstimatorOptions bounded;
  bounded.max_keys = 8;
  DurationEstimator e(bounded);
  for (int i = 0; i < 100; ++i) {
    JobClass j{"p", "u" + std::to_string(i), "job" + std::to_string(i), "d", "s"};
    e.Observe(j, absl::Minutes(1 + i), 1.0);
    e.Observe(j, absl::Minutes(1 + i), 1.0);
  }
  CHECK(e.keys() == 8);
  JobClass last{"p", "u99", "job99", "d", "s"};
  REQUIRE(e.Estimate(last, 1.0).has_value());
  CHECK_FALSE(e.Estimate({"p", "u0", "job0", "d", "s"}, 1.0).has_value());

  DurationEstimator restarted(bounded);
  REQUIRE(restarted.Import(e.Export()).ok());
  CHECK(restarted.keys() == 8);
  CHECK(restarted.Estimate(last, 1.0)->basis == e.Estimate(last, 1.0)->basis);
  CHECK(Seconds(restarted.Estimate(last, 1.0)->median) == Seconds(e.Estimate(last, 1.0)->median));
  CHECK_FALSE(restarted.Import({{"k", "garbage"}}).ok());
  // Nonsense runs are not history.
  DurationEstimator strict;
  strict.Observe(Train(), absl::ZeroDuration(), 1.0);
  strict.Observe(Train(), -absl::Seconds(5), 1.0);
  strict.Observe(Train(), absl::InfiniteDuration(), 1.0);
  CHECK(strict.keys() == 0);
}
