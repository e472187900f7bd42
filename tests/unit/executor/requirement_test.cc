#include <catch2/catch.hpp>

#include "executor/reqstr/requirement.h"

using jc::nexec::ParseRequirement;
using jc::nexec::ResourceValues;

namespace {

std::string Canonical(const std::string& text) {
  auto r = ParseRequirement(text);
  INFO(text << " -> " << r.status());
  REQUIRE(r.ok());
  return jc::nexec::ToString(*r);
}

std::string ErrorOf(const std::string& text) {
  auto r = ParseRequirement(text);
  INFO(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

}  // namespace

TEST_CASE("requirement strings parse to their canonical form", "[B2][reqstr]") {
  const std::pair<const char*, const char*> golden[] = {
      {"", ""},
      {"select[mem>10]", "select[mem>10]"},
      {"mem>10", "select[mem>10]"},
      {"type==x86_64 order[ut] rusage[mem=100]", "select[type==x86_64] order[ut] rusage[mem=100]"},
      {"select[type=x86_64]", "select[type==x86_64]"},
      {"select[(mem>=1024 || swap>2048) && !fpga]",
       "select[((mem>=1024 || swap>2048) && !fpga)]"},
      {"select[model!=\"E5 v4\"]", "select[model!=\"E5 v4\"]"},
      {"select[defined(gpu)]", "select[defined(gpu)]"},
      {"order[-mem:ut,+slots]", "order[-mem:ut:slots]"},
      {"rusage[mem=100,gpu=1]", "rusage[gpu=1,mem=100]"},
      {"rusage[mem=100:gpu=1]", "rusage[gpu=1,mem=100]"},
      {"rusage[mem=0.5]", "rusage[mem=0.5]"},
      {"span[hosts=1] rusage[gpu=8]", "rusage[gpu=8] span[hosts=1]"},
      {"span[ptile=4]", "span[ptile=4]"},
      {"same[model]", "same[model]"},
      {"same[model:type]", "same[model:type]"},
      {"select[mem>1] select[gpu>0]", "select[(mem>1 && gpu>0)]"},
      {"4{mem>10} 5{rusage[gpu=1]}", "4{select[mem>10]} 5{rusage[gpu=1]}"},
      {"1{select[type==ps]} 2{select[gpu>0] rusage[gpu=1] span[ptile=1]}",
       "1{select[type==ps]} 2{select[gpu>0] rusage[gpu=1] span[ptile=1]}"},
  };
  for (const auto& [in, out] : golden) {
    CHECK(Canonical(in) == out);
    CHECK(Canonical(out) == out);  // the canonical form parses back to itself
  }
}

TEST_CASE("multi-section strings keep each section's slots", "[B2][reqstr]") {
  auto r = ParseRequirement("4{mem>10} 5{rusage[gpu=1]}");
  REQUIRE(r.ok());
  CHECK(r->multi_section);
  REQUIRE(r->sections.size() == 2);
  CHECK(r->sections[0].slots == 4);
  CHECK(r->sections[1].slots == 5);
  CHECK(r->sections[1].rusage.at("gpu") == 1);
  CHECK(r->TotalSlots() == 9);
}

TEST_CASE("malformed requirement strings name the column and what was expected",
          "[B2][C5][reqstr]") {
  const std::pair<const char*, const char*> bad[] = {
      {"select[mem>10", "column 14: expected ']' to close select[, found the end of the string"},
      {"select[]", "column 8: expected a resource name, number or '('"},
      {"select[mem>]", "column 12: expected a resource name, number or '('"},
      {"select[mem > 10 &&]", "column 19: expected a resource name"},
      {"select[(mem>1]", "column 14: expected ')' to close '('"},
      {"rusage[mem]", "column 11: expected '=' after \"mem\" in rusage[]"},
      {"rusage[mem=abc]", "column 12: expected a number for mem in rusage[]"},
      {"rusage[mem=1,mem=2]", "mem appears twice in rusage[]"},
      {"rusage[]", "rusage[] is empty"},
      {"order[]", "order[] is empty"},
      {"span[hosts=2]", "span[hosts=...] supports only 1"},
      {"span[ptile=0]", "must be a whole number of at least 1"},
      {"span[ptile=1.5]", "must be a whole number of at least 1"},
      {"span[ptile=41111111111]", "must be at most 1000000"},
      {"span[tile=2]", "span[] takes hosts=1 or ptile=n, not \"tile\""},
      {"rusage[mem=1] rusage[gpu=1]", "column 15: rusage[...] appears twice"},
      {"rusage[mem=1] mem>10", "column 15: expected select[, order[, rusage[, span[ or same["},
      {"select[mem#10]", "column 11: unexpected character '#'"},
      // Quoted whole, so that the message is UTF-8 as a protobuf string must be (one byte of
      // it made a job pack's answer unreadable: attacker helper-78); a control as \x01.
      {"select[mem>1]\u2010", "column 14: unexpected character '\u2010'"},
      {"select[mem\xe9]", "column 11: unexpected character '\\xe9'"},
      {"select[mem\x01]", "column 11: unexpected character '\\x01'"},
      {"select[type==\"x86]", "unterminated quoted string"},
      {"4{mem>10", "expected '}' to close the section"},
      {"4{mem>10} rusage[gpu=1]", "expected a slot count before '{'"},
      {"0{mem>10}", "slot count must be a whole number of at least 1"},
      // Each count fits an int; their sum did not, and came out negative: past every check.
      {"2000000000{mem>10} 2000000000{mem>10}", "column 20: the sections' slot counts add up past 2147483647"},
      {"select[defined(1)]", "expected a resource name in defined()"},
  };
  for (const auto& [in, message] : bad) {
    std::string err = ErrorOf(in);
    INFO(in << " -> " << err);
    CHECK(err.find(message) != std::string::npos);
  }
}

TEST_CASE("select expressions evaluate against a host's numeric, text and tag resources",
          "[B2][reqstr]") {
  ResourceValues host{{"mem", 2048.0}, {"type", std::string("x86_64")}, {"gpu", 4.0},
                      {"fpga", true}, {"model", std::string("E5 v4")}};
  auto holds = [&](const std::string& text) {
    auto r = ParseRequirement(text);
    INFO(text << " -> " << r.status());
    REQUIRE(r.ok());
    REQUIRE(r->sections[0].select != nullptr);
    return jc::nexec::EvaluateSelect(*r->sections[0].select, host);
  };
  CHECK(holds("mem>1024"));
  CHECK_FALSE(holds("mem>4096"));
  CHECK(holds("type==x86_64"));
  CHECK_FALSE(holds("type==aarch64"));
  CHECK(holds("type!=aarch64"));
  CHECK(holds("fpga && gpu>=4"));
  CHECK_FALSE(holds("!fpga"));
  CHECK_FALSE(holds("infiniband"));  // a tag the host lacks
  CHECK(holds("!infiniband"));
  CHECK(holds("defined(gpu) && !defined(infiniband)"));
  CHECK(holds("model==\"E5 v4\""));
  CHECK(holds("mem<1024 || gpu==4"));
  CHECK_FALSE(holds("swap>0"));  // unknown numeric resource: not satisfied
}

TEST_CASE("requirement strings that nest too deep or run too long are refused, not a crash", "[B2][C5][reqstr]") {
  // `((((...` overflowed the master's stack (found by tests/fuzz/requirement_fuzz).
  for (const std::string& bad : {std::string(4000, '(') + "mem", std::string(1000, '!') + "mem",
                                 "select[" + std::string(33, '(') + "mem>1" + std::string(33, ')') + "]"}) {
    auto r = ParseRequirement(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(std::string(r.status().message()).find("nest at most 32 deep") != std::string::npos);
  }
  auto deep_enough = ParseRequirement("select[" + std::string(32, '(') + "mem>1" + std::string(32, ')') + "]");
  INFO(deep_enough.status().ToString());
  CHECK(deep_enough.ok());
  auto long_one = ParseRequirement("select[" + std::string(5000, 'a') + "]");
  REQUIRE_FALSE(long_one.ok());
  CHECK(std::string(long_one.status().message()).find("at most 4096 characters") != std::string::npos);
}
