#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>

#include "tests/testing/test_outcome.h"

namespace {

std::atomic<bool> current_test_failed{false};

// Follows each test case's assertions: a fixture's destructor runs after the failing one
// was reported (a REQUIRE throws after it), so it sees the outcome.
class OutcomeListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    current_test_failed = false;
    TestEventListenerBase::testCaseStarting(info);
  }
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk()) current_test_failed = true;
    return TestEventListenerBase::assertionEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(OutcomeListener)

namespace jc::testing {

bool CurrentTestFailed() { return current_test_failed; }

void PrintLogTails(const std::string& dir, int lines) {
  static const std::regex kLogName(R"(.*\.log(\.[0-9]+)?)");
  std::set<std::filesystem::path> logs;  // in name order: the same each time
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && std::regex_match(entry.path().filename().string(), kLogName)) {
      logs.insert(entry.path());
    }
  }
  for (const auto& path : logs) {
    std::ifstream in(path);
    std::deque<std::string> tail;
    for (std::string line; std::getline(in, line);) {
      tail.push_back(std::move(line));
      if (static_cast<int>(tail.size()) > lines) tail.pop_front();
    }
    std::cerr << "---- the last " << tail.size() << " lines of " << path.filename().string() << " ----\n";
    for (const auto& line : tail) std::cerr << line << "\n";
  }
}

}  // namespace jc::testing
