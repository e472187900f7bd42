// The scheduler's view is built from the registry, catalog, datamon and monitor records,
// and a submitted job becomes one placement request per replica (SPEC A8, A3, A7).

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "services/scheduler/snapshot_builder.h"
#include "tests/testing/fixtures.h"

namespace jc::scheduler {
namespace {

SchedulerInputs Inputs() {
  SchedulerInputs in;
  auto a = jc::testing::MakeCenter("a");
  a.set_status(1);
  a.set_network_topology("cn/north/a");
  a.set_security_grade(2);
  auto b = jc::testing::MakeCenter("b");
  b.set_status(2);  // unknown
  in.centers = {a, b};
  in.specs = {jc::testing::MakeSpec("gpu-1", "a,b")};  // 4 CPU, 16Gi, 1 GPU
  v1::SpecCenterOffer offer;
  offer.set_resource_spec_id("gpu-1");
  offer.set_ai_center_id("a");
  offer.set_can_run(true);
  offer.set_price("7");
  in.offers = {offer};
  v1::Image image;
  image.set_image_id("pytorch");
  image.set_ai_center_id("a");
  in.images = {image};
  v1::Dataset d;
  d.set_data_name("imagenet");
  d.set_data_version("1");
  d.set_size_mb(150000);
  auto* loc = d.add_location();
  loc->set_ai_center_id("a");
  in.datasets = {d};
  monitor::CenterObservation o;
  o.center = a;
  o.has_usage = true;
  o.usage.set_running_task_num(3);
  o.usage.set_waiting_task_num(1);
  o.usage.mutable_free()->set_cpu(12);
  o.usage.mutable_free()->set_gpu(2);
  o.usage.mutable_free()->set_memory(65536);
  o.has_info = true;
  o.info.set_static_power_watts(8000);
  o.info.set_performance_factor(1.5);
  o.info.mutable_network()->set_bandwidth_mbps(10000);
  auto* declared = o.info.add_specs();
  declared->set_resource_spec_id("gpu-1");
  declared->set_execution_power_watts(350);
  in.observations = {o};
  return in;
}

TEST_CASE("the snapshot joins registry, catalog, datamon and monitor figures per center [A8][A3]", "[A8][A3]") {
  Snapshot snap = BuildSnapshot(Inputs());
  REQUIRE(snap.centers().size() == 2);
  const CenterView* a = snap.Find("a");
  REQUIRE(a != nullptr);
  CHECK(a->available);
  CHECK(a->topology == "cn/north/a");
  CHECK(a->capacity.cpu == 128);
  CHECK(a->free.cpu == 12);  // from the adapter's usage
  CHECK(a->free.gpu == 2);
  CHECK(a->running_tasks == 3);
  CHECK(a->waiting_tasks == 1);
  CHECK(a->static_power_watts == 8000);
  CHECK(a->performance_factor == 1.5);
  CHECK(a->network.bandwidth_mbps == 10000);
  REQUIRE(a->specs.contains("gpu-1"));
  CHECK(a->specs.at("gpu-1").price == 7);
  CHECK(a->specs.at("gpu-1").execution_power_watts == 350);
  CHECK(a->specs.at("gpu-1").quantity.memory_mb == 16384);
  CHECK(a->specs.at("gpu-1").quantity.gpu == 1);
  CHECK(a->images.contains("pytorch"));
  CHECK(a->datasets.contains("imagenet:1"));

  const CenterView* b = snap.Find("b");
  REQUIRE(b != nullptr);
  CHECK_FALSE(b->available);
  CHECK(b->free.cpu == 128);  // no adapter (heartbeats alone), never reported: its whole capacity
  CHECK(b->specs.empty());    // the catalog has no runnable offer for it
}

// A restart: every center's status is in the store at once, its usage only after the
// monitor's first poll. A center full of running replicas looked empty until then, and the
// first pass sent it replicas it had no room for.
TEST_CASE("a center whose adapter the monitor polls has nothing free until its first usage report, whatever its "
          "capacity, and what it reports free is bounded by its capacity [A8][A3]",
          "[A8][A3]") {
  SchedulerInputs in = Inputs();
  in.centers[0].set_adapter_address("unix:/run/a.sock");
  in.observations.clear();
  // Without a monitor (--services without it) nothing ever reports: its capacity, as before.
  CHECK(BuildSnapshot(in).Find("a")->free.cpu == 128);
  in.monitored = true;
  const CenterView* a = BuildSnapshot(in).Find("a");
  REQUIRE(a != nullptr);
  CHECK(a->free.cpu == 0);
  CHECK(a->free.gpu == 0);
  CHECK(a->capacity.cpu == 128);
  // Its first report says what is free.
  in = Inputs();
  in.monitored = true;
  in.centers[0].set_adapter_address("unix:/run/a.sock");
  in.observations[0].center = in.centers[0];
  CHECK(BuildSnapshot(in).Find("a")->free.cpu == 12);
  // A rogue adapter's "a billion CPUs free", or a negative figure, is bounded by what the
  // center holds.
  in.observations[0].usage.mutable_free()->set_cpu(1000000000);
  in.observations[0].usage.mutable_free()->set_gpu(-4);
  CHECK(BuildSnapshot(in).Find("a")->free.cpu == 128);
  CHECK(BuildSnapshot(in).Find("a")->free.gpu == 0);
}

TEST_CASE("a center whose adapter says it holds nothing at all keeps its registered capacity for what could ever run "
          "there, with nothing free [A8][A3]",
          "[A8][A3]") {
  SchedulerInputs in = Inputs();
  in.monitored = true;
  in.centers[0].set_adapter_address("unix:/run/a.sock");
  in.observations[0].center = in.centers[0];
  in.observations[0].usage.mutable_free()->Clear();  // its nodes not up yet
  in.observations[0].info.mutable_capacity()->Clear();
  in.observations[0].info.mutable_capacity()->set_cpu(0);
  const CenterView* a = BuildSnapshot(in).Find("a");
  REQUIRE(a != nullptr);
  CHECK(a->capacity.cpu == 128);  // as registered
  CHECK(a->free.cpu == 0);
  // What it says once they are up is its capacity.
  in.observations[0].info.mutable_capacity()->set_cpu(16);
  CHECK(BuildSnapshot(in).Find("a")->capacity.cpu == 16);
}

TEST_CASE("a center's reported start delays reach its view by spec, as of the monitor's poll, and bad figures are "
          "unknown [A16]",
          "[A16][A3]") {
  SchedulerInputs in = Inputs();
  auto& usage = in.observations[0].usage;
  const absl::Time polled = absl::FromUnixSeconds(1'800'000'000);
  in.observations[0].observed_at = polled;
  auto add = [&](const std::string& spec, double wait) {
    auto* e = usage.add_start_estimates();
    e->set_resource_spec_id(spec);
    e->set_wait_seconds(wait);
    e->set_source("nexec backfill");
  };
  add("gpu-1", 1800);
  add("gpu-1", 5);                  // a second figure for the spec: the first stands
  add("not-in-the-catalog", 60);    // a spec the federation does not know
  add("gpu-1-typo", std::nan(""));
  Snapshot snap = BuildSnapshot(in);
  const CenterView* a = snap.Find("a");
  REQUIRE(a != nullptr);
  CHECK(a->queue_reported_at == polled);
  REQUIRE(a->reported_start_delay.size() == 1);
  CHECK(a->reported_start_delay.at("gpu-1") == absl::Minutes(30));
  // A center that never reported: nothing known, no report time.
  const CenterView* b = snap.Find("b");
  CHECK(b->reported_start_delay.empty());
  CHECK(b->queue_reported_at == absl::InfinitePast());

  // Negative and endless waits are no estimates; a huge one is kept as a year.
  usage.clear_start_estimates();
  add("gpu-1", -3);
  CHECK(BuildSnapshot(in).Find("a")->reported_start_delay.empty());
  usage.clear_start_estimates();
  add("gpu-1", std::numeric_limits<double>::infinity());
  CHECK(BuildSnapshot(in).Find("a")->reported_start_delay.empty());
  usage.clear_start_estimates();
  add("gpu-1", 1e12);
  CHECK(BuildSnapshot(in).Find("a")->reported_start_delay.at("gpu-1") == absl::Hours(365 * 24));
}

TEST_CASE("the monitor names what changed materially in a center's queue report, and nothing for small moves "
          "[A16]",
          "[A16][A3]") {
  auto usage = [](std::vector<std::pair<std::string, double>> waits) {
    jointcloud::adapter::v1::Usage u;
    for (const auto& [spec, wait] : waits) {
      auto* e = u.add_start_estimates();
      e->set_resource_spec_id(spec);
      e->set_wait_seconds(wait);
    }
    return u;
  };
  CHECK(monitor::QueueReportChange(usage({}), usage({})).empty());
  CHECK(monitor::QueueReportChange(usage({{"a", 3600}}), usage({{"a", 3590}})).empty());  // the clock moved
  CHECK(monitor::QueueReportChange(usage({{"a", 10}}), usage({{"a", 50}})).empty());      // under a minute
  CHECK(monitor::QueueReportChange(usage({}), usage({{"a", 3600}})) == "a 3600s (was unknown)");
  CHECK(monitor::QueueReportChange(usage({{"a", 3600}}), usage({{"a", 0}})) == "a 0s (was 3600s)");
  CHECK(monitor::QueueReportChange(usage({{"a", 3600}, {"b", 5}}), usage({{"b", 5}})) == "a unknown (was 3600s)");
}

TEST_CASE("an image registered at one center is also at every center whose adapter reports it [A4][A8]",
          "[A4][A8]") {
  SchedulerInputs in = Inputs();  // "pytorch" registered at a
  monitor::CenterObservation b;
  b.center = in.centers[1];
  b.has_info = true;
  b.info.add_image_ids("pytorch");
  in.observations.push_back(b);
  in.observations[0].info.add_image_ids("tensorflow");  // a reports one the catalog has at no center
  Snapshot snap = BuildSnapshot(in);
  CHECK(snap.Find("a")->images.contains("pytorch"));
  CHECK(snap.Find("a")->images.contains("tensorflow"));
  CHECK(snap.Find("b")->images.contains("pytorch"));
  // Without the report, b lacks it.
  in.observations.pop_back();
  CHECK_FALSE(BuildSnapshot(in).Find("b")->images.contains("pytorch"));
}

TEST_CASE("an image with content is at every center whose hosts hold its digest (CenterInfo.image_digests) [A4]",
          "[A4]") {
  SchedulerInputs in = Inputs();
  const std::string digest = "sha256:" + std::string(64, 'b');
  v1::Image cuda;
  cuda.set_image_id("cuda-app");
  cuda.set_ai_center_id("a");
  cuda.set_reference("registry.example:5000/ai/cuda:12");
  cuda.set_digest(digest);
  in.images.push_back(cuda);
  monitor::CenterObservation b;
  b.center = in.centers[1];
  b.has_info = true;
  b.info.add_image_digests("sha256:" + std::string(64, 'c'));  // another image's
  in.observations.push_back(b);
  CHECK_FALSE(BuildSnapshot(in).Find("b")->images.contains("cuda-app"));
  in.observations.back().info.add_image_digests(digest);
  CHECK(BuildSnapshot(in).Find("b")->images.contains("cuda-app"));
}

TEST_CASE("a center's port range is what its adapter says: none when it says 0, and unknown (any) for an SDK "
          "adapter of version 1, which gave ports without saying how many [A17]",
          "[A17]") {
  SchedulerInputs in = Inputs();
  monitor::CenterObservation b;
  b.center = in.centers[1];
  b.has_info = true;
  b.info.set_adapter_version("jointcloud-adapter-sdk/2");
  in.observations.push_back(b);
  CHECK(BuildSnapshot(in).Find("b")->port_range_size == 0);
  in.observations.back().info.set_port_range_size(40);
  CHECK(BuildSnapshot(in).Find("b")->port_range_size == 40);
  in.observations.back().info.set_port_range_size(-7);  // a rogue adapter's
  CHECK(BuildSnapshot(in).Find("b")->port_range_size == 0);
  in.observations.back().info.set_port_range_size(0);
  in.observations.back().info.set_adapter_version("jointcloud-adapter-sdk/1");
  CHECK(BuildSnapshot(in).Find("b")->port_range_size == std::numeric_limits<int>::max());
}

TEST_CASE("a job becomes one placement request per replica, with its data and constraints [A7][A8]",
          "[A7][A8]") {
  auto in = Inputs();
  v1::CreateTrainJobRequest job;
  job.mutable_scheduling()->set_min_security_grade(2);
  auto* t0 = job.add_tasks();
  t0->set_resource_spec_id("gpu-1");
  t0->set_image_id("pytorch");
  t0->set_replica_number(2);
  t0->add_datasets("imagenet:1");
  auto* t1 = job.add_tasks();
  t1->set_resource_spec_id("gpu-1");
  t1->set_replica_number(1);
  t1->add_center_ids("a");
  auto reqs = RequestsForJob("job-9", job, in, absl::UnixEpoch());
  REQUIRE(reqs.ok());
  REQUIRE(reqs->size() == 3);
  CHECK((*reqs)[1].task_index == 0);
  CHECK((*reqs)[1].replica_index == 1);
  CHECK((*reqs)[0].datasets.size() == 1);
  CHECK((*reqs)[0].datasets[0].size_mb == 150000);
  CHECK((*reqs)[0].min_security_grade == 2);
  CHECK((*reqs)[2].pinned_centers == std::vector<std::string>{"a"});
}

TEST_CASE("image ids are per project: a job uses its project's image of the id, else the federation's, and each is "
          "at its own centers (issue 44, hole 13) [A4][C6]",
          "[A4][C6]") {
  auto in = Inputs();  // the federation's pytorch is at a
  v1::Image mine;
  mine.set_image_id("pytorch");
  mine.set_project("ml");
  mine.set_ai_center_id("b");
  mine.set_size_mb(5);
  v1::Image theirs = mine;
  theirs.set_project("cv");
  theirs.set_ai_center_id("a");
  in.images.push_back(theirs);
  in.images.push_back(mine);
  Snapshot snap = BuildSnapshot(in);
  CHECK(snap.Find("a")->images.contains("pytorch"));
  CHECK(snap.Find("a")->images.contains("cv/pytorch"));
  CHECK_FALSE(snap.Find("a")->images.contains("ml/pytorch"));
  CHECK(snap.Find("b")->images.contains("ml/pytorch"));
  CHECK_FALSE(snap.Find("b")->images.contains("pytorch"));

  auto key_for = [&](const std::string& project) {
    v1::CreateTrainJobRequest job;
    job.set_project(project);
    auto* t = job.add_tasks();
    t->set_resource_spec_id("gpu-1");
    t->set_image_id("pytorch");
    t->set_replica_number(1);
    auto reqs = RequestsForJob("j", job, in, absl::UnixEpoch());
    REQUIRE(reqs.ok());
    return (*reqs)[0].ImageKeyOrId();
  };
  CHECK(key_for("ml") == "ml/pytorch");
  CHECK(key_for("cv") == "cv/pytorch");
  CHECK(key_for("nlp") == "pytorch");  // no image of its own: the federation's
  CHECK(key_for("") == "pytorch");
}

TEST_CASE("dataset names are per project: a job reads its project's dataset of the name, else the federation's, "
          "never another project's (issue 44) [A6][C6]",
          "[A6][C6]") {
  auto in = Inputs();  // the federation's imagenet:1 is at a
  v1::Dataset mine = in.datasets[0];
  mine.set_project("ml");
  mine.set_size_mb(5);
  mine.mutable_location(0)->set_ai_center_id("b");
  v1::Dataset theirs = mine;
  theirs.set_project("cv");
  theirs.set_size_mb(6);
  in.datasets.push_back(mine);
  in.datasets.push_back(theirs);
  Snapshot snap = BuildSnapshot(in);
  CHECK(snap.Find("a")->datasets.contains("imagenet:1"));
  CHECK(snap.Find("b")->datasets.contains("ml/imagenet:1"));
  CHECK(snap.Find("b")->datasets.contains("cv/imagenet:1"));
  CHECK_FALSE(snap.Find("b")->datasets.contains("imagenet:1"));

  auto need_for = [&](const std::string& project, const std::string& key) {
    v1::CreateTrainJobRequest job;
    job.set_project(project);
    auto* t = job.add_tasks();
    t->set_resource_spec_id("gpu-1");
    t->set_replica_number(1);
    t->add_datasets(key);
    return RequestsForJob("j", job, in, absl::UnixEpoch());
  };
  CHECK(need_for("ml", "imagenet:1")->at(0).datasets[0].key == "ml/imagenet:1");
  CHECK(need_for("ml", "imagenet:1")->at(0).datasets[0].size_mb == 5);
  CHECK(need_for("cv", "imagenet:1")->at(0).datasets[0].key == "cv/imagenet:1");
  CHECK(need_for("nlp", "imagenet:1")->at(0).datasets[0].key == "imagenet:1");
  CHECK(need_for("", "imagenet:1")->at(0).datasets[0].key == "imagenet:1");
  // Naming another project's by its snapshot key is naming an unknown dataset.
  CHECK(absl::IsInvalidArgument(need_for("ml", "cv/imagenet:1").status()));
  CHECK(absl::IsInvalidArgument(need_for("", "cv/imagenet:1").status()));
}

TEST_CASE("a job naming what does not exist is refused, naming the field [A7][C5]", "[A7][C5]") {
  auto in = Inputs();
  auto refused = [&](auto edit, const std::string& needle) {
    v1::CreateTrainJobRequest job;
    auto* t = job.add_tasks();
    t->set_resource_spec_id("gpu-1");
    t->set_replica_number(1);
    edit(job);
    auto r = RequestsForJob("j", job, in, absl::UnixEpoch());
    INFO(needle);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StrContains(r.status().message(), needle));
  };
  refused([](auto& j) { j.mutable_tasks(0)->set_resource_spec_id("tpu-9"); }, "resourceSpecId");
  refused([](auto& j) { j.mutable_tasks(0)->set_image_id("nope"); }, "imageId");
  refused([](auto& j) { j.mutable_tasks(0)->set_replica_number(0); }, "replicaNumber");
  refused([](auto& j) { j.mutable_tasks(0)->set_replica_number(-3); }, "replicaNumber");
  refused([](auto& j) { j.mutable_tasks(0)->set_replica_number(1000000); }, "replicaNumber");
  refused([](auto& j) { j.mutable_tasks(0)->add_datasets("missing:1"); }, "missing:1");
  refused([](auto& j) { j.clear_tasks(); }, "tasks");
}

}  // namespace
}  // namespace jc::scheduler
