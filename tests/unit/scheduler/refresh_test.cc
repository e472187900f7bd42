// The scheduler's view of the federation as refreshes build it (SPEC A8): two refreshes at
// once (the timer's, and a create's for a spec the view does not know yet) must leave the
// later read in force, never the earlier.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "services/scheduler/scheduler.h"
#include "tests/testing/fixtures.h"

namespace jc::scheduler {
namespace {

// One center of 4 CPUs offering "c1"; "new" too once `with_new` is set. A read can be held
// in the middle (what it read is what the catalog was when it began) until released.
class HeldCatalog final : public InputsSource {
 public:
  std::atomic<bool> with_new{false};
  std::atomic<bool> hold_next{false};
  absl::Notification reading;  // the held read has read
  absl::Notification release;

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
    o.usage.mutable_free()->set_cpu(4);
    o.usage.mutable_free()->set_memory(512 * 1024);
    in.observations.push_back(o);
    std::vector<std::string> ids = {"c1"};
    if (with_new) ids.push_back("new");
    for (const auto& id : ids) {
      auto s = jc::testing::MakeSpec(id, "east");
      (*s.mutable_resource_quantity())["cpu"] = "1";
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

TEST_CASE("a refresh whose read began before another's was applied leaves the later view in force: a spec created "
          "between the two reads stays known and a job of it is placed [A8]",
          "[A8]") {
  HeldCatalog source;
  FakeClock clock;
  Scheduler s(&source, &clock, SchedulerOptions{});
  REQUIRE(s.Refresh().ok());
  // The timer's refresh reads the catalog before "new" is created, and is slow to finish.
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
