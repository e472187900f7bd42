// Prices are exact decimals (issue 49 item 5): common/price.h, and the JSON edge that takes
// a price as a number or text and answers a number (common/json_proto.cc).
#include <catch2/catch.hpp>

#include "common/json_proto.h"
#include "common/price.h"
#include "jointcloud/v1/catalog.pb.h"

namespace v1 = ::jointcloud::v1;

TEST_CASE("a price is read exactly, in millionths, and written back in its shortest text [A2]", "[A2]") {
  CHECK(*jc::ParsePrice("12") == 12 * jc::kPriceScale);
  CHECK(*jc::ParsePrice("0.75") == 750000);
  CHECK(*jc::ParsePrice("0.000001") == 1);
  CHECK(*jc::ParsePrice("12.") == 12 * jc::kPriceScale);
  CHECK(*jc::ParsePrice(".5") == 500000);
  CHECK(*jc::ParsePrice("") == 0);
  CHECK(*jc::ParsePrice("2147483647") == jc::kMaxPriceUnits * jc::kPriceScale);  // Table 3's int32 limit
  // 0.1 + 0.2 in millionths is 0.3 exactly: no binary fraction on the way.
  CHECK(jc::FormatPrice(*jc::ParsePrice("0.1") + *jc::ParsePrice("0.2")) == "0.3");
  CHECK(jc::FormatPrice(12 * jc::kPriceScale) == "12");
  CHECK(jc::FormatPrice(750000) == "0.75");
  CHECK(jc::FormatPrice(1) == "0.000001");
  CHECK(jc::FormatPrice(0) == "0");
  for (const char* bad : {"-1", "1.0000001", "1e3", "1,5", " 1", "1 ", "0x10", ".", "1.2.3", "+1", "2147483647.5", "2147483648",
                          "99999999999999999999"}) {
    INFO(bad);
    auto p = jc::ParsePrice(bad, "tasks[0].price");
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(p.status().message().rfind("tasks[0].price: ", 0) == 0);
  }
}

TEST_CASE("REST takes a price as a JSON number or text and answers a number whose text is the price's [A2]", "[A2]") {
  for (const auto& [body, text] : std::vector<std::pair<std::string, std::string>>{
           {R"({"resource_spec_id":"s","price":12})", "12"},
           {R"({"resource_spec_id":"s","price":0.75})", "0.75"},
           {R"({"resource_spec_id":"s","price":"0.75"})", "0.75"},
           {R"({"resource_spec_id":"s","price":12.0})", "12"},
           {R"({"resourceSpecId":"s","price":1.000001})", "1.000001"},
           {R"({"resource_spec_id":"s","price":-3})", "-3"},  // read; the catalog refuses it, naming price
           {R"({"resource_spec_id":"s","price":0.00005})", "0.00005"},
           {R"({"resource_spec_id":"s","price":5e-05})", "0.00005"},
           {R"({"resource_spec_id":"s","price":1e3})", "1000"},
           {R"({"resource_spec_id":"s","price":0.0000001})", "0.0000001"},  // the catalog: more than six decimals
           {R"({"resource_spec_id":"s","price":2147483647.999999})", "2147483647.999999"},
       }) {
    INFO(body);
    v1::ResourceSpec spec;
    REQUIRE(jc::JsonToProto(body, &spec).ok());
    CHECK(spec.price() == text);
  }
  v1::ResourceSpec spec;
  CHECK_FALSE(jc::JsonToProto(R"({"price":true})", &spec).ok());
  CHECK_FALSE(jc::JsonToProto(R"({"price":)", &spec).ok());  // protobuf's parser says why

  spec.set_resource_spec_id("s");
  spec.set_price("0.75");
  CHECK(jc::ProtoToJson(spec, jc::JsonNames::kSnakeCase, false)->find(R"("price":0.75)") != std::string::npos);
  spec.set_price("12");
  CHECK(jc::ProtoToJson(spec, jc::JsonNames::kCamelCase, false)->find(R"("price":12)") != std::string::npos);
  // Never through a double: small prices are written as they are, and read back the same.
  spec.set_price("0.00005");
  const std::string small = *jc::ProtoToJson(spec, jc::JsonNames::kSnakeCase, false);
  CHECK(small.find(R"("price":0.00005)") != std::string::npos);
  v1::ResourceSpec again;
  REQUIRE(jc::JsonToProto(small, &again).ok());
  CHECK(again.price() == "0.00005");
  // A name that looks like the mark numbers are written through stays a string.
  spec.set_resource_spec_name("\u0001jc-decimal-0000:1}");
  spec.set_resource_spec_name(std::string("\x01jc-decimal-00000000:1"));
  const std::string named = *jc::ProtoToJson(spec, jc::JsonNames::kSnakeCase, false);
  REQUIRE(jc::JsonToProto(named, &again).ok());
  CHECK(again.resource_spec_name() == spec.resource_spec_name());
  spec.clear_price();
  CHECK(jc::ProtoToJson(spec, jc::JsonNames::kSnakeCase, true)->find(R"("price":0)") != std::string::npos);
  // Nested and repeated: an offer's price steps.
  v1::ListSpecCenterOffersResponse offers;
  auto* offer = offers.add_offers();
  offer->set_price("1.5");
  offer->add_prices()->set_price("0.25");
  (*offer->mutable_prices(0)->mutable_effective_from()).set_seconds(1);
  const std::string out = *jc::ProtoToJson(offers, jc::JsonNames::kSnakeCase, false);
  INFO(out);
  CHECK(out.find(R"("price":1.5)") != std::string::npos);
  CHECK(out.find(R"("price":0.25)") != std::string::npos);
  v1::ListSpecCenterOffersResponse back;
  REQUIRE(jc::JsonToProto(out, &back).ok());
  CHECK(back.offers(0).prices(0).price() == "0.25");
}
