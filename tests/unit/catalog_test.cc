#include <catch2/catch.hpp>

#include "common/timestamp.h"
#include "common/price.h"
#include "services/catalog/catalog.h"
#include "services/registry/registry.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/test_store.h"

namespace v1 = jointcloud::v1;
using jc::testing::MakeCenter;
using jc::testing::MakeSpec;

namespace {

struct Fixture {
  std::unique_ptr<jc::store::Store> store = jc::testing::MakeTestStore();
  jc::FakeClock clock;
  jc::registry::Registry registry{store.get(), &clock, {}};
  std::unique_ptr<jc::registry::CenterDirectory> dir =
      jc::registry::MakeLocalCenterDirectory(&registry);
  jc::catalog::Catalog catalog{store.get(), &clock, dir.get()};

  Fixture() {
    REQUIRE(registry.Create(MakeCenter("c1")).ok());
    auto small = MakeCenter("c2");
    small.mutable_capacity()->set_gpu(0);
    REQUIRE(registry.Create(small).ok());
    REQUIRE(registry.Heartbeat("c1", true).ok());
    REQUIRE(registry.Heartbeat("c2", true).ok());
  }
};

}  // namespace

TEST_CASE("resource specs keep their quantities and centers", "[A2]") {
  Fixture f;
  auto created = f.catalog.CreateSpec(MakeSpec("gpu-small", "c2，c1, c1"));
  REQUIRE(created.ok());
  CHECK(created->computing_center_list() == "c1,c2");
  auto got = f.catalog.GetSpec("gpu-small");
  REQUIRE(got.ok());
  CHECK(got->resource_quantity().at("memory") == "16Gi");

  v1::ListResourceSpecsRequest by_center;
  by_center.set_ai_center_id("c2");
  CHECK(f.catalog.ListSpecs(by_center)->specs_size() == 1);
  by_center.set_ai_center_id("c3");
  CHECK(f.catalog.ListSpecs(by_center)->specs_size() == 0);
  v1::ListResourceSpecsRequest by_type;
  by_type.set_service_type("interactive");
  CHECK(f.catalog.ListSpecs(by_type)->specs_size() == 0);
  by_type.set_service_type("batch");
  CHECK(f.catalog.ListSpecs(by_type)->specs_size() == 1);

  v1::ResourceSpec patch;
  patch.set_resource_spec_id("gpu-small");
  patch.set_computing_center_list("c1");
  google::protobuf::FieldMask mask;
  mask.add_paths("computing_center_list");
  REQUIRE(f.catalog.UpdateSpec(patch, mask).ok());
  by_center.set_ai_center_id("c2");
  CHECK(f.catalog.ListSpecs(by_center)->specs_size() == 0);

  REQUIRE(f.catalog.DeleteSpec("gpu-small").ok());
  CHECK(absl::IsNotFound(f.catalog.GetSpec("gpu-small").status()));
}

TEST_CASE("bad specs are refused with the reason and nothing is written", "[A2][C5]") {
  Fixture f;
  auto expect = [&](v1::ResourceSpec spec, absl::StatusCode code, const std::string& needle) {
    auto r = f.catalog.CreateSpec(spec);
    INFO(needle << " -> " << r.status());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == code);
    CHECK(std::string(r.status().message()).find(needle) != std::string::npos);
  };
  auto s = MakeSpec("s", "c1");
  (*s.mutable_resource_quantity())["memory"] = "2Gx";
  expect(s, absl::StatusCode::kInvalidArgument, "2Gx");
  s = MakeSpec("s", "c1");
  (*s.mutable_resource_quantity())["cpu"] = "-1";
  expect(s, absl::StatusCode::kInvalidArgument, "negative");
  s = MakeSpec("s", "c1");
  s.mutable_resource_quantity()->clear();
  expect(s, absl::StatusCode::kInvalidArgument, "resource_quantity is required");
  expect(MakeSpec("s", "c1,ghost"), absl::StatusCode::kInvalidArgument, "unknown center \"ghost\"");
  s = MakeSpec("s", "c1");
  s.set_service_type("batch,cron");
  expect(s, absl::StatusCode::kInvalidArgument, "cron");
  s = MakeSpec("s", "c1");
  s.set_price("-5");
  expect(s, absl::StatusCode::kInvalidArgument, "price");
  expect(MakeSpec(std::string(64, 's'), "c1"), absl::StatusCode::kInvalidArgument, "64 bytes");
  CHECK(f.catalog.ListSpecs({})->specs_size() == 0);

  REQUIRE(f.catalog.CreateSpec(MakeSpec("s", "c1")).ok());
  expect(MakeSpec("s", "c2"), absl::StatusCode::kAlreadyExists, "already exists");
  CHECK(f.catalog.GetSpec("s")->computing_center_list() == "c1");
}

TEST_CASE("the spec x center map says who can run a spec and at what price", "[A2]") {
  Fixture f;
  REQUIRE(f.catalog.CreateSpec(MakeSpec("gpu1", "c1,c2")).ok());
  v1::SetSpecCenterPriceRequest price;
  price.set_resource_spec_id("gpu1");
  price.set_ai_center_id("c1");
  price.set_price("7");
  auto offer = f.catalog.SetSpecCenterPrice(price);
  REQUIRE(offer.ok());
  CHECK(offer->price() == "7");

  v1::ListSpecCenterOffersRequest req;
  req.set_resource_spec_id("gpu1");
  auto offers = f.catalog.ListOffers(req);
  REQUIRE(offers.ok());
  REQUIRE(offers->offers_size() == 2);
  const auto& c1 = offers->offers(0);
  CHECK(c1.ai_center_id() == "c1");
  CHECK(c1.can_run());
  CHECK(c1.price() == "7");
  CHECK(c1.capacity_instances() == 8);  // 8 GPUs, one per instance
  const auto& c2 = offers->offers(1);
  CHECK_FALSE(c2.can_run());
  CHECK(c2.price() == "10");  // the spec's own price
  CHECK(c2.reason().find("gpu") != std::string::npos);

  price.set_ai_center_id("elsewhere");
  CHECK(absl::IsNotFound(f.catalog.SetSpecCenterPrice(price).status()));
  price.set_ai_center_id("c1");
  price.set_price("-1");
  CHECK(absl::IsInvalidArgument(f.catalog.SetSpecCenterPrice(price).status()));
  // Decimal prices, exactly (issue 49 item 5), kept in their canonical text.
  price.set_price("0.750");
  auto decimal = f.catalog.SetSpecCenterPrice(price);
  REQUIRE(decimal.ok());
  CHECK(decimal->price() == "0.75");
  for (const char* bad : {"1.0000001", "1e3", "1,5", " 2", "abc", "."}) {
    price.set_price(bad);
    auto refused = f.catalog.SetSpecCenterPrice(price);
    INFO(bad);
    CHECK(absl::IsInvalidArgument(refused.status()));
    CHECK(refused.status().message().find("price") != std::string::npos);
  }
  CHECK(f.catalog.ListOffers(req)->offers(0).price() == "0.75");  // nothing written by the refusals
  v1::ResourceSpec spec = MakeSpec("cheap", "c1");
  spec.set_price("0.125000");
  auto created = f.catalog.CreateSpec(spec);
  REQUIRE(created.ok());
  CHECK(created->price() == "0.125");
}

TEST_CASE("images belong to a registered center and name known specs", "[A4]") {
  Fixture f;
  REQUIRE(f.catalog.CreateSpec(MakeSpec("gpu1", "c1")).ok());
  v1::Image img;
  img.set_image_id("pytorch-2");
  img.set_name("PyTorch 2.1");
  img.set_ai_center_id("c1");
  img.mutable_base_os()->set_base_os("ubuntu22.04");
  img.mutable_base_os()->set_cuda_version("12.1");
  img.set_framework("PyTorch");
  img.set_resource_spec("gpu1");
  REQUIRE(f.catalog.CreateImage(img).ok());
  CHECK(f.catalog.GetImage("", "pytorch-2")->base_os().cuda_version() == "12.1");
  CHECK(absl::IsAlreadyExists(f.catalog.CreateImage(img).status()));

  v1::ListImagesRequest by_framework;
  by_framework.set_framework("PyTorch");
  CHECK(f.catalog.ListImages(by_framework)->images_size() == 1);
  by_framework.set_framework("TensorFlow");
  CHECK(f.catalog.ListImages(by_framework)->images_size() == 0);

  auto bad = img;
  bad.set_image_id("x");
  bad.set_ai_center_id("ghost");
  CHECK(absl::IsInvalidArgument(f.catalog.CreateImage(bad).status()));
  bad.set_ai_center_id("c1");
  bad.set_resource_spec("nope");
  CHECK(absl::IsInvalidArgument(f.catalog.CreateImage(bad).status()));
  CHECK(absl::IsNotFound(f.catalog.GetImage("", "x").status()));

  v1::Image patch;
  patch.set_image_id("pytorch-2");
  patch.set_framework("PyTorch,TensorFlow");
  google::protobuf::FieldMask mask;
  mask.add_paths("framework");
  REQUIRE(f.catalog.UpdateImage(patch, mask).ok());
  CHECK(f.catalog.ListImages(by_framework)->images_size() == 1);
  REQUIRE(f.catalog.DeleteImage("", "pytorch-2").ok());
  CHECK(absl::IsNotFound(f.catalog.DeleteImage("", "pytorch-2")));
}

TEST_CASE("image ids are unique within a project: projects and the federation each have their own (issue 44, hole "
          "13)",
          "[A4][C6]") {
  Fixture f;
  REQUIRE(f.catalog.CreateSpec(MakeSpec("gpu1", "c1")).ok());
  auto image = [](const std::string& project, const std::string& name) {
    v1::Image img;
    img.set_image_id("torch");
    img.set_name(name);
    img.set_ai_center_id("c1");
    img.set_framework("PyTorch");
    img.set_project(project);
    return img;
  };
  REQUIRE(f.catalog.CreateImage(image("", "federation's")).ok());
  REQUIRE(f.catalog.CreateImage(image("alpha", "alpha's")).ok());
  REQUIRE(f.catalog.CreateImage(image("beta", "beta's")).ok());
  // Within one project the id is still one image.
  CHECK(absl::IsAlreadyExists(f.catalog.CreateImage(image("beta", "beta's")).status()));
  CHECK(f.catalog.GetImage("", "torch")->name() == "federation's");
  CHECK(f.catalog.GetImage("alpha", "torch")->name() == "alpha's");
  CHECK(f.catalog.GetImage("beta", "torch")->name() == "beta's");
  CHECK(absl::IsNotFound(f.catalog.GetImage("gamma", "torch").status()));
  CHECK(f.catalog.FindImages("torch")->size() == 3);
  // "-" names the federation in requests, so no image is registered under it.
  CHECK(absl::IsInvalidArgument(f.catalog.CreateImage(image("-", "dash")).status()));

  // An update and a delete touch their project's image only.
  v1::Image patch;
  patch.set_image_id("torch");
  patch.set_project("alpha");
  patch.set_framework("PyTorch,TensorFlow");
  google::protobuf::FieldMask mask;
  mask.add_paths("framework");
  REQUIRE(f.catalog.UpdateImage(patch, mask).ok());
  CHECK(f.catalog.GetImage("alpha", "torch")->framework() == "PyTorch,TensorFlow");
  CHECK(f.catalog.GetImage("beta", "torch")->framework() == "PyTorch");
  REQUIRE(f.catalog.DeleteImage("beta", "torch").ok());
  CHECK(f.catalog.GetImage("alpha", "torch").ok());
  CHECK(f.catalog.GetImage("", "torch").ok());
  REQUIRE(f.catalog.CreateImage(image("beta", "beta's again")).ok());

  // Pages of one item each still list all three images of the same id, once each.
  v1::ListImagesRequest list;
  list.set_page_size(1);
  std::vector<std::string> names;
  for (int page = 0; page < 5; ++page) {
    auto got = f.catalog.ListImages(list);
    REQUIRE(got.ok());
    for (const auto& i : got->images()) names.push_back(i.name());
    if (got->next_page_token().empty()) break;
    list.set_page_token(got->next_page_token());
  }
  CHECK(names == std::vector<std::string>{"federation's", "alpha's", "beta's again"});
  // A project's member lists its project's and the federation's.
  v1::ListImagesRequest all;
  auto alpha = f.catalog.ListImages(all, std::vector<std::string>{"alpha"});
  REQUIRE(alpha.ok());
  CHECK(alpha->images_size() == 2);
}

TEST_CASE("prices have a history: a change takes effect now or later, never before, and the steps say what was in "
          "force when [A2][C5]",
          "[A2][C5]") {
  Fixture f;
  REQUIRE(f.catalog.CreateSpec(MakeSpec("gpu1", "c1,c2")).ok());  // the spec's own price: 10
  const absl::Time created = f.clock.Now();
  f.clock.Advance(absl::Hours(1));
  v1::SetSpecCenterPriceRequest price;
  price.set_resource_spec_id("gpu1");
  price.set_ai_center_id("c1");
  price.set_price("7");
  REQUIRE(f.catalog.SetSpecCenterPrice(price).ok());
  const absl::Time first_change = f.clock.Now();
  // Scheduled: 12 from tomorrow.
  price.set_price("12");
  *price.mutable_effective_from() = jc::ToTimestamp(f.clock.Now() + absl::Hours(24));
  auto scheduled = f.catalog.SetSpecCenterPrice(price);
  REQUIRE(scheduled.ok());
  CHECK(scheduled->price() == "7");  // not yet
  REQUIRE(scheduled->prices_size() == 3);
  std::vector<v1::PriceChange> steps(scheduled->prices().begin(), scheduled->prices().end());
  CHECK(jc::catalog::PriceAt(steps, created + absl::Minutes(5)) == 10 * jc::kPriceScale);  // the spec's, before c1 had its own
  CHECK(jc::catalog::PriceAt(steps, first_change + absl::Minutes(1)) == 7 * jc::kPriceScale);
  CHECK(jc::catalog::PriceAt(steps, first_change + absl::Hours(25)) == 12 * jc::kPriceScale);

  // In the past: refused, and nothing changed.
  price.set_price("1");
  *price.mutable_effective_from() = jc::ToTimestamp(f.clock.Now() - absl::Hours(2));
  auto past = f.catalog.SetSpecCenterPrice(price);
  REQUIRE(absl::IsInvalidArgument(past.status()));
  CHECK(past.status().message().find("in the past") != std::string::npos);
  v1::ListSpecCenterOffersRequest req;
  req.set_resource_spec_id("gpu1");
  auto offers = f.catalog.ListOffers(req);
  REQUIRE(offers.ok());
  CHECK(offers->offers(0).prices_size() == 3);
  CHECK(offers->offers(0).price() == "7");
  // c2 follows the spec's own price, whose change is a step of its own.
  f.clock.Advance(absl::Hours(48));
  v1::ResourceSpec patch;
  patch.set_resource_spec_id("gpu1");
  patch.set_price("15");
  google::protobuf::FieldMask mask;
  mask.add_paths("price");
  REQUIRE(f.catalog.UpdateSpec(patch, mask).ok());
  offers = f.catalog.ListOffers(req);
  REQUIRE(offers.ok());
  CHECK(offers->offers(0).price() == "12");  // c1's own, scheduled yesterday, now in force
  CHECK(offers->offers(1).price() == "15");
  CHECK(offers->offers(1).prices_size() == 2);  // 10, then 15
}

TEST_CASE("price steps: a center's own price overrides the spec's from when it is set, and prices kept before the "
          "history stand from the start [A2]",
          "[A2]") {
  using jc::catalog::PriceRow;
  auto at = [](int64_t ms) { return absl::FromUnixMillis(ms); };
  const int64_t u = jc::kPriceScale;
  auto steps = jc::catalog::PriceSteps(5 * u, {{100, 5 * u}, {300, 6 * u}}, std::nullopt, {{200, 9 * u}});
  CHECK(jc::catalog::PriceAt(steps, at(150)) == 5 * jc::kPriceScale);
  CHECK(jc::catalog::PriceAt(steps, at(250)) == 9 * jc::kPriceScale);
  CHECK(jc::catalog::PriceAt(steps, at(350)) == 9 * jc::kPriceScale);  // the center's stays over the spec's change
  CHECK(jc::catalog::PriceAt(steps, at(50)) == 5 * jc::kPriceScale);   // before any: the first
  auto legacy = jc::catalog::PriceSteps(5 * u, {}, 3 * u, {});
  REQUIRE(legacy.size() == 1);
  CHECK(legacy[0].price() == "3");
}
