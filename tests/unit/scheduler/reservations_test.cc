// A placed replica's reservation at the scheduler (SPEC A8): held until the center's usage
// includes the replica, then dropped — not before (the center would look emptier than it is)
// and not a poll later (it would look fuller: a usage report asked for while the submit was
// under way already counted the replica, and the next placement passed the center over).

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/timestamp.h"
#include "services/scheduler/scheduler.h"
#include "tests/testing/fixtures.h"

namespace jc::scheduler {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// One center of 4 CPUs offering c1..c4 (1 to 4 CPUs); its usage as the test sets it: free
// CPUs, when the monitor asked for it (this clock) and from when the adapter measured it (its
// own clock, here an hour off: the two are never compared with each other).
class OneCenter final : public InputsSource {
 public:
  int free_cpus = 4;
  absl::Time asked = kT0;
  absl::Time measured_from = kT0 + absl::Hours(1);
  bool says_when = true;
  std::string adapter_version = "jointcloud-adapter-sdk/3";
  // A spec "new" (1 CPU) in the catalog too, created as the test says.
  std::atomic<bool> with_new{false};
  // The next read is held once it has read (what it read is the catalog as it began) until
  // released.
  std::atomic<bool> hold_next{false};
  absl::Notification reading, release;
  absl::StatusOr<SchedulerInputs> Fetch() override {
    SchedulerInputs in;
    auto c = jc::testing::MakeCenter("east");
    c.set_status(1);
    c.set_security_grade(3);
    c.set_network_topology("cn/east");
    c.mutable_capacity()->set_cpu(4);
    c.mutable_capacity()->set_gpu(0);
    in.centers.push_back(c);
    monitor::CenterObservation o;
    o.center = c;
    o.has_usage = true;
    o.observed_at = asked;
    o.has_info = true;
    o.info.set_adapter_version(adapter_version);
    if (says_when) *o.usage.mutable_at() = ToTimestamp(measured_from);
    o.usage.mutable_free()->set_cpu(free_cpus);
    o.usage.mutable_free()->set_memory(512 * 1024);
    in.observations.push_back(o);
    for (int cpus = 1; cpus <= (with_new ? 5 : 4); ++cpus) {
      const std::string id = cpus == 5 ? "new" : "c" + std::to_string(cpus);
      auto s = jc::testing::MakeSpec(id, "east");
      (*s.mutable_resource_quantity())["cpu"] = std::to_string(cpus == 5 ? 1 : cpus);
      (*s.mutable_resource_quantity())["gpu"] = "0";
      (*s.mutable_resource_quantity())["memory"] = "1Gi";
      in.specs.push_back(s);
      v1::SpecCenterOffer offer;
      offer.set_resource_spec_id(id);
      offer.set_ai_center_id("east");
      offer.set_can_run(true);
      offer.set_price("1");
      in.offers.push_back(offer);
    }
    if (hold_next.exchange(false)) {
      reading.Notify();
      release.WaitForNotification();
    }
    return in;
  }
};

v1::CreateTrainJobRequest Job(const std::string& spec) {
  v1::CreateTrainJobRequest job;
  job.set_name("job");
  job.set_project("p");
  auto* t = job.add_tasks();
  t->set_name("t");
  t->set_command("true");
  t->set_resource_spec_id(spec);
  t->set_replica_number(1);
  return job;
}

// The most CPUs a replica placed at east now could have (0 to 4), as a plan sees it.
int FreeCpus(Scheduler& s) {
  for (int cpus = 4; cpus >= 1; --cpus) {
    auto plan = s.Plan(Job("c" + std::to_string(cpus)));
    REQUIRE(plan.ok());
    if (plan->placed()) return cpus;
  }
  return 0;
}

TEST_CASE("a reservation is dropped once the center's usage holds the replica: asked for after its acceptance "
          "arrived, or measured after the center accepted it by the center's own clock, never counted twice [A8]",
          "[A8]") {
  OneCenter source;
  FakeClock clock(kT0);  // placed at kT0
  Scheduler s(&source, &clock, SchedulerOptions{});
  REQUIRE(s.Refresh().ok());
  REQUIRE(FreeCpus(s) == 4);
  auto placed = s.Place("job-a", Job("c1"), {{0, 0, 0, {}}}, {});
  REQUIRE(placed.ok());
  REQUIRE(placed->placed);
  const std::string key = Scheduler::ReservationKey("job-a", 0, 0, 0);
  // Placed, not yet acknowledged: reserved on the view the next refresh builds too.
  REQUIRE(s.Refresh().ok());
  CHECK(FreeCpus(s) == 3);
  // The center accepted it at +10 s by its clock; its acceptance arrived here at kT0 + 5 s.
  const absl::Time center_accepted = source.measured_from + absl::Seconds(10);
  s.Reported(key, kT0 + absl::Seconds(5), center_accepted);

  SECTION("a poll measured before the center accepted it: the usage lacks it, the reservation holds") {
    source.asked = kT0 + absl::Seconds(4);
    source.measured_from = center_accepted - absl::Milliseconds(1);
    REQUIRE(s.Refresh().ok());
    CHECK(FreeCpus(s) == 3);
  }
  SECTION("a poll asked before the acceptance arrived, measured after the center accepted it: the usage holds it, "
          "the reservation goes at once") {
    source.asked = kT0 + absl::Seconds(4);
    source.measured_from = center_accepted;
    source.free_cpus = 3;
    REQUIRE(s.Refresh().ok());
    CHECK(FreeCpus(s) == 3);  // counted once (twice: 2)
    // and for good: a later poll that no longer shows it (it ended) frees its CPU
    source.free_cpus = 4;
    REQUIRE(s.Refresh().ok());
    CHECK(FreeCpus(s) == 4);
  }
  SECTION("an adapter older than SDK 3, whose `at` was stamped after measuring: only a poll asked after the "
          "acceptance arrived drops the reservation") {
    source.adapter_version = "jointcloud-adapter-sdk/2";
    source.asked = kT0 + absl::Seconds(4);
    source.measured_from = center_accepted + absl::Seconds(1);
    source.free_cpus = 3;
    REQUIRE(s.Refresh().ok());
    CHECK(FreeCpus(s) == 2);
  }
  SECTION("a poll asked before the replica was placed holds nothing of it, whatever the center's clock says (a "
          "rogue center dating its acceptances in 1970)") {
    source.asked = kT0 - absl::Seconds(1);
    source.measured_from = center_accepted + absl::Hours(1);
    REQUIRE(s.Refresh().ok());
    CHECK(FreeCpus(s) == 3);
  }
  SECTION("a center that does not say when it measured: the reservation holds until a poll asked after the "
          "acceptance arrived (counted twice for a poll, the safe side)") {
    source.says_when = false;
    source.asked = kT0 + absl::Seconds(4);
    source.free_cpus = 3;
    REQUIRE(s.Refresh().ok());
    CHECK(FreeCpus(s) == 2);
    source.asked = kT0 + absl::Seconds(6);
    REQUIRE(s.Refresh().ok());
    CHECK(FreeCpus(s) == 3);
  }
  SECTION("an acknowledgement without the center's instant: only a poll asked after it drops the reservation") {
    s.Forget(key);
    auto again = s.Place("job-b", Job("c1"), {{0, 0, 0, {}}}, {});
    REQUIRE(again.ok());
    const std::string b = Scheduler::ReservationKey("job-b", 0, 0, 0);
    s.Reported(b, kT0 + absl::Seconds(5));
    source.asked = kT0 + absl::Seconds(4);
    source.measured_from = center_accepted + absl::Hours(1);
    source.free_cpus = 3;
    REQUIRE(s.Refresh().ok());
    CHECK(FreeCpus(s) == 2);
  }
}

TEST_CASE("a refresh whose read began before another's was applied leaves the later view in force: a spec created "
          "between the two reads stays known and a job of it is placed [A8]",
          "[A8]") {
  OneCenter source;
  FakeClock clock(kT0);
  Scheduler s(&source, &clock, SchedulerOptions{});
  REQUIRE(s.Refresh().ok());
  // Two refreshes at once (the timer's, and a create's for a spec the view does not know
  // yet) must leave the later read in force. The timer's reads the catalog before "new" is
  // created, and is slow to finish.
  source.hold_next = true;
  std::thread timer([&] { CHECK(s.Refresh().ok()); });
  source.reading.WaitForNotification();
  // "new" is created, and a create's refresh reads and applies it.
  source.with_new = true;
  REQUIRE(s.Refresh().ok());
  source.release.Notify();
  timer.join();
  // The slow read came last: it is older than what is in force, and changes nothing.
  auto placed = s.Place("job-new", Job("new"), {{0, 0, 0, {}}}, {});
  INFO(placed.status().ToString());
  REQUIRE(placed.ok());
  CHECK(placed->placed);
}

}  // namespace
}  // namespace jc::scheduler
