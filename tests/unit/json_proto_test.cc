// protobuf's JSON mapping through the cached type descriptions (common/json_proto.cc): the
// same text as protobuf's own functions, both ways, on every thread.
#include <catch2/catch.hpp>

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <atomic>
#include <thread>
#include <vector>

#include "common/json_proto.h"
#include "jointcloud/v1/job_record.pb.h"
#include "jointcloud/v1/jobs.pb.h"
#include "jointcloud/v1/registry.pb.h"

namespace v1 = ::jointcloud::v1;
namespace pb = google::protobuf;
using jc::JsonNames;

namespace {

// Messages with most kinds of fields the API has: enums, int64 (strings in JSON),
// timestamps, maps, repeated doubles, nested and repeated messages, bytes, json_name.
std::vector<std::unique_ptr<pb::Message>> Samples() {
  std::vector<std::unique_ptr<pb::Message>> out;
  auto record = std::make_unique<v1::JobRecord>();
  record->set_job_id("job-00000042");
  record->set_seq(42);
  record->set_status("running");
  record->mutable_received_at()->set_seconds(1'700'000'000);
  record->mutable_received_at()->set_nanos(5'000'000);
  for (int i = 0; i < 3; ++i) {
    auto* r = record->add_replicas();
    r->set_replica_index(i);
    r->set_state(v1::ReplicaRecord::RUNNING);
    r->set_center_id(i == 2 ? "" : "center-\"a\"\n");
    r->set_attempt(i);
  }
  record->mutable_request()->set_name("训练 job");
  (*record->mutable_request()->mutable_scheduling()->mutable_weights())["cost"] = 0.25;
  out.push_back(std::move(record));

  auto center = std::make_unique<v1::Center>();
  center->set_ai_center_id("bj-1");
  center->set_status(0);  // optional: printed though it is the default
  center->add_geometry(116.4);
  center->add_geometry(-39.900001);
  (*center->mutable_labels())["tier"] = "gold";
  (*center->mutable_labels())["zone"] = "";
  out.push_back(std::move(center));

  auto response = std::make_unique<v1::CreateTrainJobResponse>();
  response->set_job_id("job-1");
  auto* info = response->add_task_infos();
  info->add_center_ids("bj-1");
  info->add_center_ids("");
  out.push_back(std::move(response));

  auto chunk = std::make_unique<v1::LogChunk>();
  chunk->set_data(std::string("\0\xff log", 6));
  out.push_back(std::move(chunk));

  out.push_back(std::make_unique<v1::TrainJobEvent>());  // empty
  return out;
}

}  // namespace

TEST_CASE("JSON of a message is protobuf's own, in every naming and defaults mode, and parses back equal", "[A12]") {
  for (const auto& message : Samples()) {
    for (JsonNames names : {JsonNames::kSnakeCase, JsonNames::kCamelCase}) {
      for (bool defaults : {false, true}) {
        pb::util::JsonPrintOptions options;
        options.preserve_proto_field_names = names == JsonNames::kSnakeCase;
        options.always_print_primitive_fields = defaults;
        std::string expected;
        REQUIRE(pb::util::MessageToJsonString(*message, &expected, options).ok());
        auto json = jc::ProtoToJson(*message, names, defaults);
        REQUIRE(json.ok());
        INFO(message->GetTypeName() << " " << expected);
        CHECK(*json == expected);

        std::unique_ptr<pb::Message> back(message->New());
        REQUIRE(jc::JsonToProto(*json, back.get()).ok());
        CHECK(pb::util::MessageDifferencer::Equals(*message, *back));
      }
    }
  }
}

TEST_CASE("bad JSON is refused with protobuf's own reason and changes nothing, while good JSON replaces the message", "[A12]") {
  for (std::string bad : {std::string(R"({"name": "x", "no_such_field": 1})"), std::string(R"({"name": )"),
                          std::string(R"({"tasks": [{"replica_number": "many"}]})"), std::string("[1, 2]")}) {
    v1::CreateTrainJobRequest expected;
    pb::util::JsonParseOptions options;
    auto theirs = pb::util::JsonStringToMessage(bad, &expected, options);
    REQUIRE_FALSE(theirs.ok());
    v1::CreateTrainJobRequest message;
    message.set_desc("before");
    absl::Status ours = jc::JsonToProto(bad, &message);
    INFO(bad);
    CHECK(ours.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(ours.message()) == "malformed JSON body: " + std::string(theirs.message()));
    CHECK(message.desc() == "before");
  }
  v1::CreateTrainJobRequest replaced;
  replaced.set_desc("before");
  REQUIRE(jc::JsonToProto(R"({"name": "x"})", &replaced).ok());
  CHECK(replaced.desc().empty());  // a parse replaces the message, as protobuf's does
}

TEST_CASE("many threads converting at once all get the right text", "[A12]") {
  auto samples = Samples();
  std::vector<std::string> expected;
  for (const auto& m : samples) {
    std::string e;
    pb::util::JsonPrintOptions options;
    REQUIRE(pb::util::MessageToJsonString(*m, &e, options).ok());
    expected.push_back(e);
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        size_t k = static_cast<size_t>(t + i) % samples.size();
        auto json = jc::ProtoToJson(*samples[k], JsonNames::kCamelCase, false);
        std::unique_ptr<pb::Message> back(samples[k]->New());
        if (!json.ok() || *json != expected[k] || !jc::JsonToProto(*json, back.get()).ok() ||
            !pb::util::MessageDifferencer::Equals(*samples[k], *back)) {
          ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
}

TEST_CASE("a message of a pool built at run time converts too", "[A12]") {
  pb::FileDescriptorProto file;
  file.set_name("runtime.proto");
  file.set_package("rt");
  file.set_syntax("proto3");
  auto* type = file.add_message_type();
  type->set_name("Thing");
  auto* field = type->add_field();
  field->set_name("display_name");
  field->set_number(1);
  field->set_type(pb::FieldDescriptorProto::TYPE_STRING);
  field->set_label(pb::FieldDescriptorProto::LABEL_OPTIONAL);
  pb::DescriptorPool pool;
  const pb::FileDescriptor* built = pool.BuildFile(file);
  REQUIRE(built != nullptr);
  pb::DynamicMessageFactory factory(&pool);
  std::unique_ptr<pb::Message> thing(factory.GetPrototype(built->message_type(0))->New());
  REQUIRE(jc::JsonToProto(R"({"displayName": "dynamic"})", thing.get()).ok());
  auto json = jc::ProtoToJson(*thing, JsonNames::kSnakeCase, false);
  REQUIRE(json.ok());
  CHECK(*json == R"({"display_name":"dynamic"})");
}
