// ADR 0016: jc::FillFromJson reads a parsed document into a message exactly as protobuf's
// JSON parser reads the document's text (doc.dump(), what the gateway handed protobuf
// before), or declines. Every message of the API, filled at random and printed by protobuf
// in all four modes, is read back both ways; so are those documents mutated at random (a
// value of another kind, a number past its field's range, an unknown enum name, both names
// of a field, two members of a oneof), where protobuf's parser may refuse: the reader must
// then decline too, never accept.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_fill.h"
#include "common/json_proto.h"
#include "jointcloud/v1/jobs.pb.h"
#include "tests/testing/random_message.h"

namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;
using Json = nlohmann::json;
using jc::testing::ApiMessages;
using jc::testing::Filler;

std::unique_ptr<pb::Message> New(const pb::Descriptor* d) {
  return std::unique_ptr<pb::Message>(pb::MessageFactory::generated_factory()->GetPrototype(d)->New());
}

// protobuf's parser on the document's text, as util::JsonStringToMessage (the reference).
bool Reference(const Json& doc, pb::Message* m) {
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  return pb::util::JsonStringToMessage(doc.dump(), m, options).ok();
}

std::string Deterministic(const pb::Message& m) {
  std::string out;
  {
    pb::io::StringOutputStream stream(&out);
    pb::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

struct Outcome {
  bool filled = false;
  bool reference_ok = false;
};

// Reads `doc` both ways; requires the same message where FillFromJson filled one, and
// that it filled nothing protobuf's parser refused.
Outcome Compare(const Json& doc, const pb::Descriptor* d) {
  auto ours = New(d);
  auto theirs = New(d);
  Outcome out;
  out.filled = jc::FillFromJson(doc, ours.get());
  out.reference_ok = Reference(doc, theirs.get());
  INFO(d->full_name() << "\n" << doc.dump());
  if (!out.filled) {
    CHECK(ours->ByteSizeLong() == 0);  // declined: left cleared
    return out;
  }
  REQUIRE(out.reference_ok);  // never accepts what protobuf refuses
  pb::util::MessageDifferencer differ;
  std::string why;
  differ.ReportDifferencesToString(&why);
  INFO("ours:\n" << ours->DebugString() << "protobuf's:\n" << theirs->DebugString());
  REQUIRE(differ.Compare(*ours, *theirs));
  // The same bytes too: a -0.0 or a field present at its default value shows here (maps
  // in key order).
  REQUIRE(Deterministic(*ours) == Deterministic(*theirs));
  return out;
}

std::string Print(const pb::Message& m, bool snake, bool defaults) {
  pb::util::JsonPrintOptions o;
  o.always_print_primitive_fields = defaults;
  o.preserve_proto_field_names = snake;
  std::string out;
  if (!pb::util::MessageToJsonString(m, &out, o).ok()) return "";
  return out;
}

// Whether a message of this type can hold something FillFromJson leaves to protobuf.
bool MayDecline(const pb::Descriptor* d, std::vector<const pb::Descriptor*>* seen) {
  if (std::find(seen->begin(), seen->end(), d) != seen->end()) return false;
  seen->push_back(d);
  if (d->file()->syntax() != pb::FileDescriptor::SYNTAX_PROTO3 || d->full_name().rfind("google.protobuf.", 0) == 0) {
    return true;
  }
  for (int i = 0; i < d->field_count(); ++i) {
    const FD* f = d->field(i);
    if ((f->is_map() && f->message_type()->map_key()->type() != FD::TYPE_STRING) || f->type() == FD::TYPE_FLOAT || f->type() == FD::TYPE_BYTES || f->type() == FD::TYPE_DOUBLE ||
        f->type() == FD::TYPE_ENUM) {
      return true;  // maps, floats, bytes; NaN and ±Infinity; unknown enum numbers
    }
    if (f->cpp_type() == FD::CPPTYPE_MESSAGE && MayDecline(f->message_type(), seen)) return true;
  }
  return false;
}

// Changes one value somewhere in `doc` at random: another kind, an edge number, an enum
// name no enum has, a key's other spelling.
class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  void Mutate(Json* doc) {
    std::vector<Json*> values;
    Collect(doc, &values);
    if (values.empty()) return;
    Json* v = values[Int(0, static_cast<int64_t>(values.size()) - 1)];
    switch (Int(0, 15)) {
      case 0: *v = nullptr; break;
      case 1: *v = true; break;
      case 2: *v = Json::array({*v}); break;
      case 3: *v = Json::object(); break;
      case 4: *v = "ALL_SUCCEED"; break;
      case 5: *v = "not an enum name"; break;
      case 6: *v = Pick<int64_t>({0, -1, 1, 2147483647, 2147483648LL, -2147483648LL, -2147483649LL, 4294967295LL,
                                 4294967296LL, 9007199254740992LL, 9007199254740993LL, INT64_MAX, INT64_MIN});
        break;
      case 7: *v = Pick<uint64_t>({UINT64_MAX, uint64_t{1} << 63}); break;
      case 8: *v = Pick<double>({1.0, 0.5, -0.0, 1e300, 3.4e38, 3.5e38, 1e-320, 100.0, -2.5}); break;
      case 9: *v = Pick<const char*>({"", "12", "-3", "1e2", "NaN", "Infinity", "true", "2020-01-01T00:00:00Z", "3s"});
        break;
      case 10: *v = Json::array(); break;
      case 11: *v = Json::array({1, "a", nullptr}); break;
      case 12: RenameKey(doc); break;
      default: AddKey(doc); break;
    }
  }

 private:
  int64_t Int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return *(values.begin() + Int(0, static_cast<int64_t>(values.size()) - 1));
  }
  void Collect(Json* v, std::vector<Json*>* out) {
    if (v->is_object()) {
      for (auto& [key, value] : v->items()) {
        out->push_back(&value);
        Collect(&value, out);
      }
    } else if (v->is_array()) {
      for (auto& value : *v) {
        out->push_back(&value);
        Collect(&value, out);
      }
    }
  }
  void Objects(Json* v, std::vector<Json*>* out) {
    if (v->is_object()) out->push_back(v);
    if (v->is_object() || v->is_array()) {
      for (auto& value : *v) Objects(&value, out);
    }
  }
  // A key spelled the other way (`resourceSpecId` as `resource_spec_id` or back), beside or
  // instead of the first.
  void RenameKey(Json* doc) {
    std::vector<Json*> objects;
    Objects(doc, &objects);
    Json* o = objects[Int(0, static_cast<int64_t>(objects.size()) - 1)];
    if (o->empty()) return;
    auto it = o->begin();
    std::advance(it, Int(0, static_cast<int64_t>(o->size()) - 1));
    std::string key = it.key(), other;
    for (char c : key) {
      if (c >= 'A' && c <= 'Z') {
        other += '_';
        other += static_cast<char>(c - 'A' + 'a');
      } else {
        other += c;
      }
    }
    if (other == key) {
      other.clear();
      bool up = false;
      for (char c : key) {
        if (c == '_') {
          up = true;
        } else {
          other += up && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
          up = false;
        }
      }
    }
    Json value = it.value();
    if (Int(0, 1) == 0) o->erase(it);
    (*o)[other] = value;
  }
  // A key of another field of the message, or of none.
  void AddKey(Json* doc) {
    std::vector<Json*> objects;
    Objects(doc, &objects);
    Json* o = objects[Int(0, static_cast<int64_t>(objects.size()) - 1)];
    (*o)[Pick<const char*>({"name", "tasks", "status", "kind", "replicaNumber", "replica_number", "seconds", "nope",
                            "command", "jobId", "job_id", "weights", "deadline"})] =
        Pick<int>({0, 1}) ? Json("x") : Json(3);
  }

  std::mt19937 rng_;
};

}  // namespace

TEST_CASE("FillFromJson reads every message of the API, printed by protobuf in all four modes, into the message "
          "protobuf's parser reads [C3]",
          "[C3]") {
  auto messages = ApiMessages();
  REQUIRE(messages.size() > 100);
  int filled = 0, compared = 0;
  uint32_t seed = 1;
  for (const pb::Descriptor* d : messages) {
    std::vector<const pb::Descriptor*> seen;
    const bool may_decline = MayDecline(d, &seen);
    for (int round = 0; round < 20; ++round) {
      auto m = New(d);
      Filler(seed++).Fill(m.get());
      for (bool snake : {false, true}) {
        for (bool defaults : {false, true}) {
          const std::string text = Print(*m, snake, defaults);
          if (text.empty()) continue;  // protobuf's printer refused (a Timestamp out of range)
          Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
          if (doc.is_discarded()) continue;  // not UTF-8: nlohmann refuses it, as the gateway does
          Outcome o = Compare(doc, d);
          ++compared;
          filled += o.filled;
          INFO(d->full_name() << "\n" << text);
          // A shape it reads, printed by protobuf, is read (so this test can fail).
          if (!may_decline) CHECK(o.filled);
        }
      }
    }
  }
  CHECK(filled > compared / 3);
}

TEST_CASE("FillFromJson, on documents mutated at random, reads what protobuf's parser reads or declines, and never "
          "accepts what protobuf refuses [C3]",
          "[C3]") {
  auto messages = ApiMessages();
  int filled = 0, refused_by_protobuf = 0, compared = 0;
  uint32_t seed = 100000;
  for (const pb::Descriptor* d : messages) {
    for (int round = 0; round < 40; ++round) {
      // A document it reads, so that what it then does is the mutation's doing.
      auto m = New(d);
      Filler(seed++).Fill(m.get());
      Json doc = Json::parse(Print(*m, round % 2 == 0, round % 4 < 2), nullptr, /*allow_exceptions=*/false);
      auto probe = New(d);
      if (doc.is_discarded() || !jc::FillFromJson(doc, probe.get())) continue;
      Mutator mutator(seed++);
      mutator.Mutate(&doc);
      if (round % 5 == 0) mutator.Mutate(&doc);
      Outcome o = Compare(doc, d);
      ++compared;
      filled += o.filled;
      refused_by_protobuf += !o.reference_ok;
    }
  }
  // The mutations reach both sides of the line.
  CHECK(compared > 2000);
  CHECK(filled > compared / 10);
  CHECK(refused_by_protobuf > compared / 10);
}

TEST_CASE("a trainjob create body is read by reflection, and what reflection leaves (a timeLimit, weights, a null) "
          "still reads through protobuf's parser [C3]",
          "[C3]") {
  const Json body = Json::parse(
      R"({"name":"resnet50","tasks":[{"name":"train","command":"torchrun train.py","resourceSpecId":"gpu-1",)"
      R"("replicaNumber":2,"centerIDs":["a","b"]}],"statusPolicy":"ANY_FAIL","retryPolicy":{"maxRetries":3}})");
  jointcloud::v1::CreateTrainJobRequest request;
  REQUIRE(jc::FillFromJson(body, &request));
  CHECK(request.name() == "resnet50");
  CHECK(request.tasks(0).replica_number() == 2);
  CHECK(request.tasks(0).has_replica_number());
  CHECK(request.tasks(0).center_ids_size() == 2);
  CHECK(request.status_policy() == jointcloud::v1::ANY_FAIL);
  CHECK(request.retry_policy().max_retries() == 3);
  const Json weighted = Json::parse(R"({"scheduling":{"weightProfile":"cost","weights":{"cost":0.5,"x":2}}})");
  REQUIRE(jc::FillFromJson(weighted, &request));
  CHECK(request.name().empty());  // cleared first
  CHECK(request.scheduling().weights().at("cost") == 0.5);
  CHECK(request.scheduling().weights().at("x") == 2.0);
  // A document built in code may hold bytes that are not UTF-8 (nlohmann's parser takes
  // none): declined, as no message may hold them.
  CHECK_FALSE(jc::FillFromJson(Json{{"name", std::string("\xff\xfe")}}, &request));
  Json bad_key = Json::object();
  bad_key["scheduling"]["weights"][std::string("\xff")] = 1.0;
  CHECK_FALSE(jc::FillFromJson(bad_key, &request));

  for (const char* declined : {R"({"name":"a","timeLimit":"60s"})", R"({"scheduling":{"weights":{"cost":"0.5"}}})",
                               R"({"name":null})", R"({"statusPolicy":1})", R"({"tasks":[{"replicaNumber":"2"}]})",
                               R"({"tasks":[{"replicaNumber":2.0}]})", R"({"name":"a","name_":"b"})"}) {
    INFO(declined);
    const Json doc = Json::parse(declined);
    jointcloud::v1::CreateTrainJobRequest m;
    m.set_name("left over");
    CHECK_FALSE(jc::FillFromJson(doc, &m));
    CHECK(m.ByteSizeLong() == 0);
    // jc::JsonDocToProto reads it all the same (or refuses it with protobuf's words).
    jointcloud::v1::CreateTrainJobRequest by_protobuf, by_doc;
    const bool ok = Reference(doc, &by_protobuf);
    CHECK(jc::JsonDocToProto(doc, &by_doc).ok() == ok);
    if (ok) CHECK(pb::util::MessageDifferencer::Equals(by_doc, by_protobuf));
  }
}
