// A request body's keys, named as protobuf's JSON mapping takes them, and the first one a
// message lacks said with where it is and the name meant.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "jointcloud/v1/jobs.pb.h"
#include "services/gateway/unknown_field.h"

namespace {

using jc::gateway::FieldOfJsonKey;

TEST_CASE("a body's key names a field by its proto name or its JSON name, and nothing else [A12]", "[A12]") {
  const auto* task = jointcloud::v1::TaskSpec::descriptor();
  REQUIRE(FieldOfJsonKey(task, "resource_spec_id") != nullptr);
  CHECK(FieldOfJsonKey(task, "resource_spec_id")->name() == "resource_spec_id");
  CHECK(FieldOfJsonKey(task, "resourceSpecId") == FieldOfJsonKey(task, "resource_spec_id"));
  // A json_name of its own ("centerIDs"): that or the proto name, not the lowerCamel.
  REQUIRE(FieldOfJsonKey(task, "centerIDs") != nullptr);
  CHECK(FieldOfJsonKey(task, "centerIDs")->name() == "center_ids");
  CHECK(FieldOfJsonKey(task, "center_ids") == FieldOfJsonKey(task, "centerIDs"));
  CHECK(FieldOfJsonKey(task, "centerIds") == nullptr);
  CHECK(FieldOfJsonKey(task, "ResourceSpecId") == nullptr);  // no case folding
  CHECK(FieldOfJsonKey(task, "") == nullptr);
  // Another type's names are its own.
  CHECK(FieldOfJsonKey(jointcloud::v1::CreateTrainJobRequest::descriptor(), "resourceSpecId") == nullptr);
  auto unknown = jc::gateway::FindUnknownField(nlohmann::json::parse(R"({"tasks": [{"comand": "true"}]})"),
                                               jointcloud::v1::CreateTrainJobRequest::descriptor());
  REQUIRE(unknown.has_value());
  CHECK(unknown->Message() == "tasks[0].comand: no such field; did you mean \"command\"?");
}

}  // namespace
