// The live placement bench (issue 45 Deliver 7) in small, so it cannot rot: three nexec
// centers behind jc-adapter-native under the jointcloud server, ten jobs replayed as shipped
// and as FCFS + first fit. Both runs complete every job; first fit fills the first center
// in federation order (a-large, 8 CPUs) before any other; the default spreads over the
// centers by its scores. How much faster the default is, is the bench's figure, not a test.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

#include "tests/testing/server_processes.h"

namespace {

// The count of jobs a policy's summary row gives `center` ("a-large 8, b-medium 0, ..."); -1: none.
int JobsAt(const std::string& out, const std::string& policy, const std::string& center) {
  std::smatch row;
  if (!std::regex_search(out, row, std::regex("\n" + policy + " +[0-9]+/[0-9]+ [^\n]*"))) return -1;
  std::smatch count;
  const std::string line = row.str();
  if (!std::regex_search(line, count, std::regex(center + " ([0-9]+)"))) return -1;
  return std::stoi(count[1]);
}

}  // namespace

TEST_CASE("live placement on nexec centers: the default and FCFS + first fit each complete every job, first fit "
          "filling the first center in federation order [A16][A14]",
          "[A16][A14]") {
  const std::string dir = std::filesystem::temp_directory_path() / ("jc-e2e-live-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto ran = jc::testing::RunCaptured(dir, {JC_LIVE_PLACEMENT_BENCH, "10", "0.8", "7", "3"});
  INFO(ran.out);
  INFO(ran.err);
  REQUIRE(ran.code == 0);
  CHECK(std::regex_search(ran.out, std::regex("\ndefault +10/10 ")));
  CHECK(std::regex_search(ran.out, std::regex("\nfcfs\\+first_fit +10/10 ")));
  // a-large holds 8 replicas at once: first fit places nothing elsewhere until it is full.
  CHECK(JobsAt(ran.out, "fcfs\\+first_fit", "a-large") >= 8);
  int used = 0;
  for (const char* c : {"a-large", "b-medium", "c-small"}) used += JobsAt(ran.out, "default", c) > 0;
  CHECK(used >= 2);
  std::filesystem::remove_all(dir);
}
