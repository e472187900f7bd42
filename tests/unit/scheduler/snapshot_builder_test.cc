// The scheduler's view is built from the registry, catalog, datamon and monitor records,
// and a submitted job becomes one placement request per replica (SPEC A8, A3, A7).

#include <catch2/catch.hpp>

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
  offer.set_price(7);
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
  CHECK(b->free.cpu == 128);  // never reported: its whole capacity
  CHECK(b->specs.empty());    // the catalog has no runnable offer for it
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
