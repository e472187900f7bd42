#include <catch2/catch.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "executor/sensor/sensor.h"
#include "tests/testing/process.h"

using jc::nexec::ParseSensorOutput;

namespace {

// The daemon's log, captured while it lives: read through the sink's own lock (the sensor's
// thread writes it meanwhile).
class CapturedLog {
 public:
  CapturedLog()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(4096)), previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("sensor-test", sink_));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string Text() const {
    std::string text;
    for (const std::string& line : sink_->last_formatted()) text += line;
    return text;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace

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

TEST_CASE("a sensor holds its own output and error pipes, not the daemon's stdin, stderr nor what the daemon "
          "inherited, and what it says on stderr reaches the daemon's log",
          "[B1][C6]") {
  // A sensor runs for the daemon's whole life and may look at accounts' paths (a `df`): what
  // it holds, a supervisor's pipe among it, would be held as long (attacker helper-93), and
  // by its children after the daemon's SIGKILL, which ends the sensor alone (helper-94).
  auto dir = std::filesystem::temp_directory_path() / ("jc-sensor-fds-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const int inherited = open("/dev/null", O_RDONLY);  // not close-on-exec, as from whoever started the daemon
  REQUIRE(inherited >= 3);
  // The daemon's stdin and stderr pipes (a supervisor's) while the sensor starts.
  int in_ends[2], err_ends[2];
  REQUIRE(pipe2(in_ends, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err_ends, O_CLOEXEC) == 0);
  char err_name[64] = {};
  REQUIRE(readlink(("/proc/self/fd/" + std::to_string(err_ends[1])).c_str(), err_name, sizeof err_name - 1) > 0);
  auto path = (dir / "ress.host").string();
  std::ofstream(path) << "#!/bin/sh\nn=0; [ \"$(readlink /proc/$$/fd/0)\" = /dev/null ] && n=1\n"
                         "h=0; [ -e /proc/$$/fd/" << inherited << " ] && h=1\n"
                         "e=0; [ \"$(readlink /proc/$$/fd/2)\" = '" << err_name << "' ] && e=1\n"
                         "echo 'df: /home/alice/mnt: Transport endpoint is not connected' >&2\n"
                         "echo '- resource: stdinnull'; echo \"  value: $n\"; echo '- resource: inherited'; "
                         "echo \"  value: $h\"; echo '- resource: daemonstderr'; echo \"  value: $e\"; echo '---'\n"
                         "while true; do sleep 1; done\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  const int saved_stdin = fcntl(0, F_DUPFD_CLOEXEC, 3);
  const int saved_stderr = fcntl(2, F_DUPFD_CLOEXEC, 3);
  REQUIRE(saved_stdin >= 0);
  REQUIRE(saved_stderr >= 0);
  std::string text;
  auto log = std::make_unique<CapturedLog>();
  REQUIRE(dup2(in_ends[0], 0) == 0);
  REQUIRE(dup2(err_ends[1], 2) == 2);
  std::map<std::string, std::string> seen;
  bool said = false;
  {
    jc::nexec::SensorRunner runner({path});
    jc::testing::WaitUntil([&] {
      seen.clear();
      for (const auto& r : runner.Current()) seen[r.resource()] = r.value();
      return seen.size() == 3;
    });
    said = jc::testing::WaitUntil(
        [&] { return log->Text().find("Transport endpoint is not connected") != std::string::npos; });
  }
  text = log->Text();
  log.reset();
  dup2(saved_stdin, 0);
  dup2(saved_stderr, 2);
  close(saved_stdin);
  close(saved_stderr);
  for (int fd : {in_ends[0], in_ends[1], err_ends[0], err_ends[1], inherited}) close(fd);
  std::filesystem::remove_all(dir);
  INFO(text);
  CHECK(seen["stdinnull"] == "1");
  CHECK(seen["inherited"] == "0");
  CHECK(seen["daemonstderr"] == "0");
  CHECK(said);
  CHECK(text.find("ress.host (stderr): df: /home/alice/mnt: Transport endpoint is not connected") !=
        std::string::npos);
}

TEST_CASE("a sensor that keeps printing on stderr fills the daemon's log with no more than 20 of its lines a run",
          "[B1][C6]") {
  auto dir = std::filesystem::temp_directory_path() / ("jc-sensor-noisy-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "ress.host").string();
  std::ofstream(path) << "#!/bin/sh\ni=0\nwhile true; do i=$((i+1)); echo \"noise $i\" >&2; "
                         "echo '- resource: rounds'; echo \"  value: $i\"; echo '---'; "
                         "[ $i -ge 200 ] && exec sleep 300; done\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  auto log = std::make_unique<CapturedLog>();
  bool all_rounds = false;
  {
    jc::nexec::SensorRunner runner({path});
    all_rounds = jc::testing::WaitUntil([&] {
      for (const auto& r : runner.Current()) {
        if (r.resource() == "rounds" && r.value() == "200") return true;
      }
      return false;
    });
  }
  const std::string text = log->Text();
  log.reset();
  std::filesystem::remove_all(dir);
  INFO(text.substr(0, 4000));
  CHECK(all_rounds);
  size_t lines = 0;
  for (size_t at = text.find("(stderr): noise "); at != std::string::npos; at = text.find("(stderr): noise ", at + 1)) {
    ++lines;
  }
  CHECK(lines == 20);
  CHECK(text.find("(stderr): noise 20\n") != std::string::npos);
  CHECK(text.find("(stderr): noise 21\n") == std::string::npos);
  CHECK(text.find("more on its stderr, not logged until it starts again") != std::string::npos);
}

TEST_CASE("a sensor's line longer than 64 KiB is read whole, and its last round counts without `---` or a final "
          "newline",
          "[B1]") {
  auto dir = std::filesystem::temp_directory_path() / ("jc-sensor-long-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "ress.host").string();
  const std::string description(70000, 'd');
  // Its last round ends only when its output does: its stdout closed before it sleeps.
  std::ofstream(path) << "#!/bin/sh\nprintf -- '- resource: long\\n  type: text\\n  value: v\\n  description: "
                      << description << "'\nexec >&-\nexec sleep 300\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  std::string seen;
  {
    CapturedLog log;
    jc::nexec::SensorRunner runner({path});
    jc::testing::WaitUntil([&] {
      for (const auto& r : runner.Current()) {
        if (r.resource() == "long") seen = r.description();
      }
      return !seen.empty();
    });
    INFO(log.Text().substr(0, 2000));
    CHECK(seen.size() == description.size());
    CHECK(seen == description);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a sensor whose child keeps writing on stderr after the sensor's output ended does not hold the daemon's "
          "reader: the sensor is started again",
          "[B1][C6]") {
  auto dir = std::filesystem::temp_directory_path() / ("jc-sensor-chatty-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "ress.host").string();
  std::ofstream(path) << "#!/bin/sh\n(exec >&-; while :; do echo chatter >&2; done) &\n"
                         "echo '- resource: chatty'; echo '  value: 1'; echo '---'\nexit 0\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  bool restarted = false;
  std::string text;
  {
    CapturedLog log;
    jc::nexec::SensorRunner runner({path}, absl::Milliseconds(100));
    restarted = jc::testing::WaitUntil(
        [&] { return log.Text().find("exited; starting it again") != std::string::npos; }, std::chrono::seconds(20));
    text = log.Text();
  }
  std::filesystem::remove_all(dir);
  INFO(text.substr(0, 2000));
  CHECK(restarted);
}

TEST_CASE("the sensors of a host report at most 1000 resources: a round that would name more is refused, the last "
          "good values kept",
          "[B1][C5]") {
  // Attacker helper-97: a sensor naming new resources every round grew the agent and its
  // heartbeats until the master refused them and the host was lost.
  auto dir = std::filesystem::temp_directory_path() / ("jc-sensor-many-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "ress.host").string();
  std::ofstream(path) << "#!/bin/sh\nr=0\nwhile [ $r -lt 3 ]; do r=$((r+1)); i=0\n"
                         "  while [ $i -lt 600 ]; do i=$((i+1)); echo \"- resource: r${r}_$i\"; echo '  value: 1'; done\n"
                         "  echo '---'\ndone\nexec sleep 300\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  size_t count = 0;
  std::string text;
  {
    CapturedLog log;
    jc::nexec::SensorRunner runner({path});
    const bool refused = jc::testing::WaitUntil(
        [&] { return log.Text().find("the sensors of a host may report") != std::string::npos; });
    count = runner.Current().size();
    text = log.Text();
    CHECK(refused);
  }
  std::filesystem::remove_all(dir);
  INFO(text.substr(0, 2000));
  CHECK(count == 600);  // the first round's; the second would have made 1,200
}
