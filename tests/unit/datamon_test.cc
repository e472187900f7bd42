#include <catch2/catch.hpp>

#include "services/datamon/datamon.h"
#include "services/datamon/source_selection.h"
#include "services/registry/registry.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/test_store.h"

namespace v1 = jointcloud::v1;
using jc::testing::MakeCenter;

namespace {

v1::DatasetLocation Loc(const std::string& center, const std::string& topology) {
  v1::DatasetLocation l;
  l.set_ai_center_id(center);
  l.set_dataset_url("file:///data/" + center + "/imagenet");
  l.set_access("r");
  l.set_network_topology(topology);
  return l;
}

}  // namespace

TEST_CASE("topology depth counts shared path segments", "[A6]") {
  CHECK(jc::datamon::SharedTopologyDepth("cn/bj/dc1", "cn/bj/dc2") == 2);
  CHECK(jc::datamon::SharedTopologyDepth("cn/bj", "us/ny") == 0);
  CHECK(jc::datamon::SharedTopologyDepth("", "cn") == 0);
}

TEST_CASE("source selection filters, scores each evaluator and ranks by weight", "[A6]") {
  jc::datamon::SelectionInput in;
  in.target_center_id = "target";
  in.target_topology = "cn/bj/dc9";
  in.weights = jc::datamon::DefaultWeights();
  in.dataset.set_data_name("imagenet");
  in.dataset.set_data_version("v1");

  auto near = Loc("near", "cn/bj/dc1");  // close, but busy and slow
  near.set_concurrency_limit(10);
  near.set_current_downloads(9);
  near.set_download_cost(300);
  near.set_download_rate_limit(100);
  auto far = Loc("far", "us/ny/dc1");  // far, idle, fast, reliable
  far.set_concurrency_limit(10);
  far.set_current_downloads(1);
  far.set_download_cost(60);
  far.set_download_rate_limit(1000);
  far.mutable_download_state()->set_succeeded(20);
  auto writeonly = Loc("closed", "cn/bj/dc1");
  writeonly.set_access("none");
  auto down = Loc("down", "cn/bj/dc1");
  auto ghost = Loc("ghost", "cn/bj/dc1");
  for (const auto& l : {near, far, writeonly, down, ghost}) *in.dataset.add_location() = l;
  in.centers["near"] = {true, 1};
  in.centers["far"] = {true, 1};
  in.centers["closed"] = {true, 1};
  in.centers["down"] = {true, 0};

  auto out = jc::datamon::SelectSources(in);
  REQUIRE(out.sources_size() == 2);
  CHECK(out.rejected_size() == 3);
  CHECK(out.sources(0).ai_center_id() == "far");
  CHECK(out.sources(0).scores().at("least_load") == Approx(100));
  CHECK(out.sources(0).scores().at("topology_affinity") == Approx(0));
  CHECK(out.sources(1).scores().at("topology_affinity") == Approx(100));
  CHECK(out.sources(0).total_score() == Approx(400));

  // Only topology counts: the near source wins.
  for (auto& [name, w] : in.weights) w = name == "topology_affinity" ? 1 : 0;
  out = jc::datamon::SelectSources(in);
  CHECK(out.sources(0).ai_center_id() == "near");

  // Private data never moves.
  in.dataset.set_is_private(true);
  out = jc::datamon::SelectSources(in);
  CHECK(out.sources_size() == 0);

  // When the target has the data there is nothing to move.
  in.dataset.set_is_private(false);
  *in.dataset.add_location() = Loc("target", "cn/bj/dc9");
  out = jc::datamon::SelectSources(in);
  CHECK(out.target_has_data());
  CHECK(out.sources_size() == 0);
}

TEST_CASE("a download goes into its source's history: average time, successes, failures [A6]", "[A6]") {
  v1::DatasetLocation loc;
  jc::datamon::RecordDownload(&loc, true, 10);
  jc::datamon::RecordDownload(&loc, true, 20);
  jc::datamon::RecordDownload(&loc, false, 99);
  CHECK(loc.download_cost() == Approx(15));  // failures do not count in the average time
  CHECK(loc.download_state().succeeded() == 2);
  CHECK(loc.download_state().failed() == 1);
  // The history moves the ranking: of two sources otherwise alike, the one that fails loses.
  jc::datamon::SelectionInput in;
  in.target_center_id = "t";
  in.weights = jc::datamon::DefaultWeights();
  for (const char* id : {"a", "b"}) {
    auto* l = in.dataset.add_location();
    l->set_ai_center_id(id);
    l->set_dataset_url(std::string("file:///") + id);
    l->set_access("r");
    in.centers[id] = {true, 1};
  }
  jc::datamon::RecordDownload(in.dataset.mutable_location(0), false, 0);
  auto ranked = jc::datamon::SelectSources(in);
  REQUIRE(ranked.sources_size() == 2);
  CHECK(ranked.sources(0).ai_center_id() == "b");
}

TEST_CASE("evaluator weights parse from configuration text", "[A6][C5]") {
  auto w = jc::datamon::ParseWeights("least_load=2, rate_limit=0.5");
  REQUIRE(w.ok());
  CHECK(w->at("least_load") == 2);
  CHECK(w->at("rate_limit") == 0.5);
  CHECK(w->at("least_time") == 1);
  CHECK(absl::IsInvalidArgument(jc::datamon::ParseWeights("speed=1").status()));
  CHECK(absl::IsInvalidArgument(jc::datamon::ParseWeights("least_load=-1").status()));
}

TEST_CASE("datasets are stored with their locations and selected from", "[A5][A6]") {
  auto store = jc::testing::MakeTestStore();
  jc::FakeClock clock;
  jc::registry::Registry registry(store.get(), &clock, {});
  auto dir = jc::registry::MakeLocalCenterDirectory(&registry);
  jc::datamon::Datamon datamon(store.get(), &clock, dir.get(), jc::datamon::DefaultWeights());
  auto target = MakeCenter("t");
  target.set_network_topology("cn/bj/dc2");
  REQUIRE(registry.Create(target).ok());
  REQUIRE(registry.Create(MakeCenter("a")).ok());
  REQUIRE(registry.Create(MakeCenter("b")).ok());
  REQUIRE(registry.Heartbeat("a", true).ok());
  REQUIRE(registry.Heartbeat("b", true).ok());

  v1::Dataset ds;
  ds.set_data_name("imagenet");
  ds.set_data_version("v1");
  ds.set_created_user("alice");
  *ds.add_location() = Loc("a", "cn/bj/dc1");
  *ds.add_location() = Loc("b", "us/ny/dc1");
  REQUIRE(datamon.Create(ds).ok());
  CHECK(absl::IsAlreadyExists(datamon.Create(ds).status()));

  v1::ListDatasetsRequest at_b;
  at_b.set_ai_center_id("b");
  CHECK(datamon.List(at_b)->datasets_size() == 1);
  at_b.set_ai_center_id("t");
  CHECK(datamon.List(at_b)->datasets_size() == 0);

  v1::SelectMigrationSourcesRequest req;
  req.mutable_key()->set_data_name("imagenet");
  req.mutable_key()->set_data_version("v1");
  req.set_target_center_id("t");
  auto sel = datamon.SelectSources(req);
  REQUIRE(sel.ok());
  REQUIRE(sel->sources_size() == 2);
  CHECK(sel->sources(0).ai_center_id() == "a");  // same region and datacenter group

  (*req.mutable_weights())["speed"] = 1;
  CHECK(absl::IsInvalidArgument(datamon.SelectSources(req).status()));
  req.clear_weights();
  req.set_target_center_id("ghost");
  CHECK(absl::IsNotFound(datamon.SelectSources(req).status()));

  auto bad = ds;
  bad.set_data_version("v2");
  *bad.add_location() = Loc("a", "x");
  CHECK(absl::IsInvalidArgument(datamon.Create(bad).status()));  // center listed twice
  bad.mutable_location()->RemoveLast();
  bad.mutable_location(0)->set_access("write");
  CHECK(absl::IsInvalidArgument(datamon.Create(bad).status()));
  bad.mutable_location(0)->set_access("r");
  bad.mutable_location(0)->set_ai_center_id("ghost");
  CHECK(absl::IsInvalidArgument(datamon.Create(bad).status()));
  v1::DatasetKey v2;
  v2.set_data_name("imagenet");
  v2.set_data_version("v2");
  CHECK(absl::IsNotFound(datamon.Get(v2).status()));

  v1::Dataset patch;
  patch.set_data_name("imagenet");
  patch.set_data_version("v1");
  patch.set_is_private(true);
  google::protobuf::FieldMask mask;
  mask.add_paths("is_private");
  REQUIRE(datamon.Update(patch, mask).ok());
  req.set_target_center_id("t");
  CHECK(datamon.SelectSources(req)->sources_size() == 0);
  REQUIRE(datamon.Delete(req.key()).ok());
  CHECK(absl::IsNotFound(datamon.Delete(req.key())));
}

TEST_CASE("a dataset's name and version are unique within its project, not across projects (issue 44)", "[A5][C6]") {
  auto store = jc::testing::MakeTestStore();
  jc::FakeClock clock;
  jc::registry::Registry registry(store.get(), &clock, {});
  auto dir = jc::registry::MakeLocalCenterDirectory(&registry);
  jc::datamon::Datamon datamon(store.get(), &clock, dir.get(), jc::datamon::DefaultWeights());
  REQUIRE(registry.Create(MakeCenter("a")).ok());
  REQUIRE(registry.Create(MakeCenter("b")).ok());
  auto make = [](const std::string& project, const std::string& center) {
    v1::Dataset ds;
    ds.set_data_name("notes");
    ds.set_data_version("v1");
    ds.set_project(project);
    ds.set_created_user(project.empty() ? "admin" : project + "-user");
    *ds.add_location() = Loc(center, "cn/bj/dc1");
    return ds;
  };
  REQUIRE(datamon.Create(make("ml", "a")).ok());
  REQUIRE(datamon.Create(make("cv", "b")).ok());
  REQUIRE(datamon.Create(make("", "a")).ok());
  CHECK(absl::IsAlreadyExists(datamon.Create(make("cv", "a")).status()));
  CHECK(absl::IsInvalidArgument(datamon.Create(make("-", "a")).status()));
  v1::DatasetKey key;
  key.set_data_name("notes");
  key.set_data_version("v1");
  CHECK(datamon.Find(key)->size() == 3);
  key.set_project("cv");
  CHECK(datamon.Get(key)->location(0).ai_center_id() == "b");
  key.set_project("-");
  CHECK(datamon.Get(key)->project().empty());
  v1::ListDatasetsRequest at_b;
  at_b.set_ai_center_id("b");
  REQUIRE(datamon.List(at_b)->datasets_size() == 1);
  CHECK(datamon.List(at_b)->datasets(0).project() == "cv");
  // An update and a delete address one project's dataset only.
  v1::Dataset patch = make("cv", "b");
  patch.set_size_mb(7);
  google::protobuf::FieldMask mask;
  mask.add_paths("size_mb");
  REQUIRE(datamon.Update(patch, mask).ok());
  key.set_project("ml");
  CHECK(datamon.Get(key)->size_mb() == 0);
  REQUIRE(datamon.Delete(key).ok());
  CHECK(absl::IsNotFound(datamon.Get(key).status()));
  key.set_project("cv");
  CHECK(datamon.Get(key)->size_mb() == 7);
  at_b.set_ai_center_id("a");
  CHECK(datamon.List(at_b)->datasets_size() == 1);  // the federation's; ml's locations went with it
}
