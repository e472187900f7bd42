#include <catch2/catch.hpp>

#include "common/paging.h"
#include "common/validate.h"

TEST_CASE("ids must be short, present and URL-safe", "[A1][C5]") {
  CHECK(jc::CheckId("ai_center_id", "center-1").ok());
  CHECK(jc::CheckId("ai_center_id", std::string(63, 'a')).ok());
  auto too_long = jc::CheckId("ai_center_id", std::string(64, 'a'));
  CHECK(absl::IsInvalidArgument(too_long));
  CHECK(std::string(too_long.message()).find("64 bytes") != std::string::npos);
  CHECK(absl::IsInvalidArgument(jc::CheckId("ai_center_id", "")));
  CHECK(absl::IsInvalidArgument(jc::CheckId("ai_center_id", "a/b")));
  CHECK(absl::IsInvalidArgument(jc::CheckRequiredText("name", std::string(64, 'x'))));
}

TEST_CASE("comma lists accept the standard's full-width comma", "[A2]") {
  auto items = jc::SplitList(" center1，center2, ,center3 ");
  REQUIRE(items == std::vector<std::string>{"center1", "center2", "center3"});
  CHECK(jc::JoinList(items) == "center1,center2,center3");
}

TEST_CASE("page tokens round-trip and foreign tokens are refused", "[C5]") {
  auto token = jc::EncodePageToken("center-9");
  CHECK(*jc::DecodePageToken(token) == "center-9");
  CHECK(jc::DecodePageToken("")->empty());
  CHECK(absl::IsInvalidArgument(jc::DecodePageToken("garbage!").status()));
  CHECK(absl::IsInvalidArgument(jc::NormalizePageSize(-1).status()));
  CHECK(*jc::NormalizePageSize(0) == jc::kDefaultPageSize);
  CHECK(*jc::NormalizePageSize(5000) == jc::kMaxPageSize);
}
