#include <catch2/catch.hpp>

#include "common/quantity.h"

using jc::Quantity;

TEST_CASE("quantities parse in the Kubernetes notation of Table 3", "[A2][quantity]") {
  struct Case {
    const char* text;
    int64_t milli;
  };
  const Case cases[] = {
      {"1", 1000},
      {"0", 0},
      {"500m", 500},
      {"2.5", 2500},
      {"2Gi", int64_t{2} * 1024 * 1024 * 1024 * 1000},
      {"1.5Ti", int64_t{3} * 1024 * 1024 * 1024 * 1024 * 500},
      {"100M", int64_t{100} * 1000 * 1000 * 1000},
      {"4k", 4'000'000},
      {"64Ki", 64 * 1024 * 1000},
      {"+3", 3000},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto q = Quantity::Parse(c.text);
    REQUIRE(q.ok());
    CHECK(q->milli() == c.milli);
  }
}

TEST_CASE("junk quantities are refused with the offending text", "[A2][C5][quantity]") {
  // The last ones overflowed 128 bits before the size check (found by tests/fuzz/quantity_fuzz).
  for (const char* bad : {"2Gx", "-1", "", "Gi", "1..5", "1.5.5", "abc", "1 Gi", "9999999999Ei",
                          "1e3", ".", "--1", "0260505655056552565005525650Ti", "1267650600228229401496703205376Ei"}) {
    INFO(bad);
    auto q = Quantity::Parse(bad);
    REQUIRE_FALSE(q.ok());
    CHECK(q.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(q.status().message()).find("invalid quantity") != std::string::npos);
  }
}

TEST_CASE("quantities convert to Table 2 units, rounding up", "[A2][quantity]") {
  CHECK(Quantity::Parse("2Gi")->CeilMebibytes() == 2048);
  CHECK(Quantity::Parse("1")->CeilMebibytes() == 1);
  CHECK(Quantity::Parse("500m")->CeilUnits() == 1);
  CHECK(Quantity::Parse("3")->CeilUnits() == 3);
  CHECK(Quantity::Parse("1Ti")->CeilGibibytes() == 1024);
  CHECK(Quantity::Parse("500m")->ToString() == "500m");
  CHECK(Quantity::Parse("2")->ToString() == "2");
}
