#include <catch2/catch.hpp>

#include "executor/agent/sensor.h"

using jc::nexec::ParseSensorOutput;

TEST_CASE("sensor output parses into resource records", "[B1]") {
  auto records = ParseSensorOutput(R"(
- resource: clksnd
  description: The second value of the current clock
  type: number
  direction: increase
  value: 42
  locale: master node01
- resource: fpga
  type: tag
  release: true
  assign: yes
  slotresource: y
- resource: model
  type: text
  value: A100
)");
  INFO(records.status());
  REQUIRE(records.ok());
  REQUIRE(records->size() == 3);
  const auto& clk = (*records)[0];
  CHECK(clk.resource() == "clksnd");
  CHECK(clk.value() == "42");
  CHECK(clk.direction() == "increase");
  REQUIRE(clk.locale_size() == 2);
  CHECK(clk.locale(1) == "node01");
  const auto& fpga = (*records)[1];
  CHECK(fpga.value() == "true");  // a tag without a value is present
  CHECK(fpga.release());
  CHECK(fpga.assign());
  CHECK(fpga.slotresource());
  CHECK((*records)[2].value() == "A100");
  CHECK(ParseSensorOutput("")->empty());
}

TEST_CASE("bad sensor output is refused with the record and field", "[B1][C5]") {
  const std::pair<const char*, const char*> bad[] = {
      {"- resource: lic\n  value: many\n", "record 1 (lic): value \"many\" is not a number"},
      {"- value: 3\n", "record 1: resource is required"},
      {"- resource: x\n  type: blob\n  value: 1\n", "type must be number, text or tag"},
      {"- resource: x\n  direction: up\n  value: 1\n", "direction must be increase or decrease"},
      {"- resource: x\n  colour: red\n  value: 1\n", "unknown field \"colour\""},
      {"resource: x\n", "must be a YAML list"},
      {"- [unclosed\n", "not YAML"},
  };
  for (const auto& [text, message] : bad) {
    auto r = ParseSensorOutput(text);
    INFO(text);
    REQUIRE_FALSE(r.ok());
    CHECK(std::string(r.status().message()).find(message) != std::string::npos);
  }
}
