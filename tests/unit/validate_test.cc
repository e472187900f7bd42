#include <catch2/catch.hpp>

#include "common/paging.h"
#include "common/validate.h"

#include "absl/strings/match.h"
#include "jointcloud/v1/job_record.pb.h"

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

TEST_CASE("a time out of protobuf's range is refused wherever it sits, named by its path", "[C5]") {
  jointcloud::v1::JobRecord record;
  CHECK(jc::CheckTimestamps(record).ok());
  auto* replica = record.add_replicas();
  replica->add_attempts()->mutable_started_at()->set_seconds(1'700'000'000);
  CHECK(jc::CheckTimestamps(record).ok());
  record.add_replicas()->add_attempts();
  auto* bad = record.mutable_replicas(1)->add_attempts()->mutable_started_at();
  bad->set_seconds(253402300800);  // 10000-01-01: one second past the last protobuf allows
  absl::Status refused = jc::CheckTimestamps(record);
  CHECK(absl::IsInvalidArgument(refused));
  CHECK(absl::StartsWith(refused.message(),
                         "replicas[1].attempts[1].startedAt: a time between 0001-01-01T00:00:00Z and "
                         "9999-12-31T23:59:59Z, got 253402300800 seconds"));
  bad->set_seconds(0);
  bad->set_nanos(-1);
  CHECK(absl::StartsWith(jc::CheckTimestamps(record).message(), "replicas[1].attempts[1].startedAt:"));
  bad->set_nanos(0);
  CHECK(jc::CheckTimestamps(record).ok());
}
