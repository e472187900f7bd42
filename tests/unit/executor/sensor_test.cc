#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "executor/sensor/sensor.h"
#include "tests/testing/process.h"

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

TEST_CASE("a sensor that starts printing malformed output keeps its last good values", "[B1][C5]") {
  auto dir = std::filesystem::temp_directory_path() / ("jc-sensor-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "ress.host").string();
  // One good round, five malformed ones, then a good round of another resource (which,
  // read in order, says the malformed ones were read).
  std::ofstream(path) << "#!/bin/sh\necho '- resource: licenses'\necho '  value: 3'\necho '---'\n"
                         "for i in 1 2 3 4 5; do echo '- resource: licenses'; echo '  value: many'; echo '---'; done\n"
                         "echo '- resource: marker'; echo '  value: 1'; echo '---'\nwhile true; do sleep 1; done\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  jc::nexec::SensorRunner runner({path});
  std::vector<nexec::v1::SensorResource> now;
  bool read = jc::testing::WaitUntil([&] {
    now = runner.Current();
    return now.size() == 2;
  });
  REQUIRE(read);
  for (const auto& r : now) {
    if (r.resource() == "licenses") CHECK(r.value() == "3");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a sensor holds its output pipe and stderr, not the daemon's stdin nor what the daemon inherited", "[B1][C6]") {
  // A sensor runs for the daemon's whole life and may look at accounts' paths (a `df`): what
  // it holds, a supervisor's pipe among it, would be held as long (attacker helper-93).
  auto dir = std::filesystem::temp_directory_path() / ("jc-sensor-fds-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const int inherited = open("/dev/null", O_RDONLY);  // not close-on-exec, as from whoever started the daemon
  REQUIRE(inherited >= 3);
  auto path = (dir / "ress.host").string();
  std::ofstream(path) << "#!/bin/sh\nn=0; [ \"$(readlink /proc/$$/fd/0)\" = /dev/null ] && n=1\n"
                         "h=0; [ -e /proc/$$/fd/" << inherited << " ] && h=1\n"
                         "echo '- resource: stdinnull'; echo \"  value: $n\"; echo '- resource: inherited'; "
                         "echo \"  value: $h\"; echo '---'\nwhile true; do sleep 1; done\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  // The daemon's stdin a pipe while the sensor starts.
  int pipe_ends[2];
  REQUIRE(pipe2(pipe_ends, O_CLOEXEC) == 0);
  const int saved_stdin = fcntl(0, F_DUPFD_CLOEXEC, 3);
  REQUIRE(saved_stdin >= 0);
  REQUIRE(dup2(pipe_ends[0], 0) == 0);
  std::map<std::string, std::string> seen;
  {
    jc::nexec::SensorRunner runner({path});
    jc::testing::WaitUntil([&] {
      seen.clear();
      for (const auto& r : runner.Current()) seen[r.resource()] = r.value();
      return seen.size() == 2;
    });
  }
  dup2(saved_stdin, 0);
  close(saved_stdin);
  close(pipe_ends[0]);
  close(pipe_ends[1]);
  close(inherited);
  std::filesystem::remove_all(dir);
  CHECK(seen["stdinnull"] == "1");
  CHECK(seen["inherited"] == "0");
}
