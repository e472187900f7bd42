// ADR 0015: jc::PrintJson prints protobuf's JSON mapping byte for byte, or declines. Every
// message of the API, filled at random, is printed by both it and protobuf's own printer
// (util::MessageToJsonString, the reference) in all four modes (JSON or proto names, with
// and without defaults), and so are shapes the API does not use yet (float, proto3
// `optional`, a oneof's scalar, unknown enum numbers) and every Unicode code point.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_print.h"
#include "common/json_proto.h"
#include "tests/testing/random_message.h"
#include "jointcloud/adapter/v1/adapter.pb.h"
#include "jointcloud/v1/accounting.pb.h"
#include "jointcloud/v1/catalog.pb.h"
#include "jointcloud/v1/common.pb.h"
#include "jointcloud/v1/datamon.pb.h"
#include "jointcloud/v1/identity.pb.h"
#include "jointcloud/v1/monitor.pb.h"
#include "jointcloud/v1/registry.pb.h"
#include "jointcloud/v1/scheduler.pb.h"
#include "jointcloud/v1/job_record.pb.h"
#include "jointcloud/v1/jobs.pb.h"
#include "nexec/v1/nexec.pb.h"

namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;
using jc::testing::ApiMessages;
using jc::testing::Filler;
using jc::testing::Utf8;


std::string Reference(const pb::Message& m, bool snake, bool defaults, bool* ok) {
  pb::util::JsonPrintOptions o;
  o.always_print_primitive_fields = defaults;
  o.preserve_proto_field_names = snake;
  std::string out;
  *ok = pb::util::MessageToJsonString(m, &out, o).ok();
  return out;
}

// Prints `m` both ways in all four modes; returns how many modes PrintJson declined.
int Compare(const pb::Message& m) {
  int declined = 0;
  for (bool snake : {false, true}) {
    for (bool defaults : {false, true}) {
      std::string ours = "prefix:";
      bool printed = jc::PrintJson(m, snake, defaults, &ours);
      bool ref_ok = false;
      std::string ref = Reference(m, snake, defaults, &ref_ok);
      INFO(m.GetDescriptor()->full_name() << " snake=" << snake << " defaults=" << defaults << "\n"
                                          << m.DebugString());
      if (!printed) {
        CHECK(ours == "prefix:");  // left as it was
        ++declined;
        continue;
      }
      REQUIRE(ref_ok);
      REQUIRE(ours == "prefix:" + ref);
    }
  }
  return declined;
}

// Whether any map in `m` (at any depth) holds entries.
bool HoldsEntries(const pb::Message& m) {
  const pb::Reflection* r = m.GetReflection();
  std::vector<const FD*> fields;
  r->ListFields(m, &fields);
  for (const FD* f : fields) {
    if (f->is_map()) return true;
    if (f->cpp_type() != FD::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        if (HoldsEntries(r->GetRepeatedMessage(m, f, i))) return true;
      }
    } else if (HoldsEntries(r->GetMessage(m, f))) {
      return true;
    }
  }
  return false;
}

// Whether a message of this type can hold something PrintJson leaves to protobuf.
bool MayDecline(const pb::Descriptor* d, std::set<const pb::Descriptor*>* seen) {
  if (!seen->insert(d).second) return false;
  if (absl::StartsWith(d->full_name(), "google.protobuf.")) return true;
  for (int i = 0; i < d->field_count(); ++i) {
    const FD* f = d->field(i);
    if (f->is_map()) {
      if (f->message_type()->map_key()->type() != FD::TYPE_STRING ||
          f->message_type()->map_value()->cpp_type() == FD::CPPTYPE_MESSAGE) {
        return true;
      }
      continue;
    }
    if (f->cpp_type() != FD::CPPTYPE_MESSAGE) continue;
    const std::string& name = f->message_type()->full_name();
    if (name == "google.protobuf.Timestamp" || name == "google.protobuf.Duration") {
      if (f->is_repeated()) return true;
      continue;
    }
    if (MayDecline(f->message_type(), seen)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("PrintJson prints every message of the API exactly as protobuf's printer does, in all four modes [C3]",
          "[C3]") {
  auto messages = ApiMessages();
  REQUIRE(messages.size() > 100);
  int printed = 0;
  uint32_t seed = 1;
  for (const pb::Descriptor* d : messages) {
    std::set<const pb::Descriptor*> seen;
    bool may_decline = MayDecline(d, &seen);
    for (int round = 0; round < 30; ++round) {
      std::unique_ptr<pb::Message> m(pb::MessageFactory::generated_factory()->GetPrototype(d)->New());
      Filler(seed++).Fill(m.get());
      int declined = Compare(*m);
      INFO(d->full_name() << "\n" << m->DebugString());
      // Valid values of a printable shape are printed (a map with entries is declined).
      if (!may_decline && !HoldsEntries(*m)) CHECK(declined == 0);
      printed += 4 - declined;
    }
    // And the empty message.
    std::unique_ptr<pb::Message> empty(pb::MessageFactory::generated_factory()->GetPrototype(d)->New());
    Compare(*empty);
  }
  CHECK(printed > static_cast<int>(messages.size()) * 60);
}

TEST_CASE("PrintJson agrees with protobuf on shapes the API does not use yet: float, proto3 optional, a oneof's "
          "scalar, Timestamps and Durations at their edges [C3]",
          "[C3]") {
  const char* kFile = R"pb(
    name: "json_print_shapes.proto" package: "shapes" syntax: "proto3"
    dependency: "google/protobuf/timestamp.proto" dependency: "google/protobuf/duration.proto"
    message_type {
      name: "Inner"
      field { name: "a_b" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "aB" }
      field { name: "n" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 json_name: "n" }
      field { name: "when" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".google.protobuf.Timestamp" json_name: "when" }
    }
    message_type {
      name: "M"
      field { name: "z_last" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "zLast" }
      field { name: "d" number: 9 label: LABEL_OPTIONAL type: TYPE_DOUBLE json_name: "d" }
      field { name: "f" number: 3 label: LABEL_OPTIONAL type: TYPE_FLOAT json_name: "f" }
      field { name: "i64" number: 4 label: LABEL_OPTIONAL type: TYPE_INT64 json_name: "i64" }
      field { name: "inner" number: 5 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".shapes.Inner" json_name: "inner" }
      field { name: "reps" number: 6 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".shapes.Inner" json_name: "reps" }
      field { name: "ts" number: 7 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".google.protobuf.Timestamp" json_name: "ts" }
      field { name: "du" number: 8 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".google.protobuf.Duration" json_name: "du" }
      field { name: "o1" number: 10 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 0 json_name: "o1" }
      field { name: "o2" number: 11 label: LABEL_OPTIONAL type: TYPE_INT32 oneof_index: 0 json_name: "o2" }
      field { name: "om" number: 20 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".shapes.Inner" oneof_index: 0 json_name: "om" }
      field { name: "ot" number: 21 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".google.protobuf.Timestamp" oneof_index: 0 json_name: "ot" }
      field { name: "e" number: 12 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".shapes.E" json_name: "e" }
      field { name: "s" number: 13 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "s" }
      field { name: "b" number: 14 label: LABEL_OPTIONAL type: TYPE_BYTES json_name: "b" }
      field { name: "mp" number: 15 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".shapes.M.MpEntry" json_name: "mp" }
      field { name: "ri" number: 16 label: LABEL_REPEATED type: TYPE_INT64 json_name: "ri" }
      field { name: "u32" number: 17 label: LABEL_OPTIONAL type: TYPE_UINT32 json_name: "u32" }
      field { name: "bo" number: 18 label: LABEL_OPTIONAL type: TYPE_BOOL json_name: "bo" }
      field { name: "opt" number: 19 label: LABEL_OPTIONAL type: TYPE_INT32 oneof_index: 1 proto3_optional: true json_name: "opt" }
      field { name: "rf" number: 22 label: LABEL_REPEATED type: TYPE_FLOAT json_name: "rf" }
      field { name: "re" number: 23 label: LABEL_REPEATED type: TYPE_ENUM type_name: ".shapes.E" json_name: "re" }
      field { name: "rb" number: 24 label: LABEL_REPEATED type: TYPE_BYTES json_name: "rb" }
      field { name: "self" number: 25 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".shapes.M" json_name: "self" }
      field { name: "me" number: 26 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".shapes.M.MeEntry" json_name: "me" }
      field { name: "sint" number: 27 label: LABEL_OPTIONAL type: TYPE_SINT64 json_name: "sint" }
      field { name: "fx" number: 28 label: LABEL_OPTIONAL type: TYPE_FIXED32 json_name: "fx" }
      nested_type { name: "MpEntry" options { map_entry: true }
        field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "key" }
        field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_DOUBLE json_name: "value" } }
      nested_type { name: "MeEntry" options { map_entry: true }
        field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "key" }
        field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".shapes.E" json_name: "value" } }
      oneof_decl { name: "choice" }
      oneof_decl { name: "_opt" }
    }
    enum_type { name: "E" value { name: "E_ZERO" number: 0 } value { name: "E_ONE" number: 1 } }
  )pb";
  (void)pb::Timestamp::descriptor();
  (void)pb::Duration::descriptor();
  pb::DescriptorPool pool(pb::DescriptorPool::generated_pool());
  pb::FileDescriptorProto proto;
  REQUIRE(pb::TextFormat::ParseFromString(kFile, &proto));
  const pb::FileDescriptor* file = pool.BuildFile(proto);
  REQUIRE(file != nullptr);
  pb::DynamicMessageFactory factory(&pool);
  const pb::Descriptor* d = file->FindMessageTypeByName("M");
  for (uint32_t seed = 1; seed <= 600; ++seed) {
    std::unique_ptr<pb::Message> m(factory.GetPrototype(d)->New());
    Filler(seed).Fill(m.get());
    CHECK(Compare(*m) == (HoldsEntries(*m) ? 4 : 0));
  }

  SECTION("a Timestamp or Duration out of its range is left to protobuf's printer, which says why") {
    std::unique_ptr<pb::Message> m(factory.GetPrototype(d)->New());
    pb::Message* ts = m->GetReflection()->MutableMessage(m.get(), d->FindFieldByName("ts"));
    ts->GetReflection()->SetInt64(ts, ts->GetDescriptor()->field(0), 253402300800);
    CHECK(Compare(*m) == 4);
    CHECK_FALSE(jc::ProtoToJson(*m, jc::JsonNames::kCamelCase).ok());
    std::unique_ptr<pb::Message> n(factory.GetPrototype(d)->New());
    pb::Message* du = n->GetReflection()->MutableMessage(n.get(), d->FindFieldByName("du"));
    du->GetReflection()->SetInt64(du, du->GetDescriptor()->field(0), -5);
    du->GetReflection()->SetInt32(du, du->GetDescriptor()->field(1), 7);  // signs that disagree
    CHECK(Compare(*n) == 4);
  }
}

TEST_CASE("PrintJson escapes every code point as protobuf's printer does, and leaves a string that is not UTF-8 to "
          "it [C3]",
          "[C3]") {
  jointcloud::v1::TrainJob job;
  // Code points in runs of 64 per string (one printer call each), every one of them.
  uint32_t cp = 1;
  while (cp <= 0x10FFFF) {
    std::string run;
    for (int k = 0; k < 64 && cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      run += Utf8(cp);
      ++k;
    }
    job.set_name(run);
    job.set_desc(std::string(1, '\0') + run);
    std::string ours;
    REQUIRE(jc::PrintJson(job, false, false, &ours));
    bool ok = false;
    std::string ref = Reference(job, false, false, &ok);
    REQUIRE(ok);
    INFO("code points before " << std::hex << cp);
    REQUIRE(ours == ref);
  }
  for (const std::string& bad : {std::string("\xff"), std::string("a\xc3"), std::string("\xe2\x28\xa1"),
                                 std::string("\xed\xa0\x80"), std::string("\xc0\xaf"), std::string("\xf4\x90\x80\x80")}) {
    job.set_name(bad);
    std::string ours = "x";
    CHECK_FALSE(jc::PrintJson(job, false, false, &ours));
    CHECK(ours == "x");
  }
}

TEST_CASE("PrintJson on what attacker helper-45 found: subnormal floats as protobuf prints them, escaped or shared "
          "JSON names, NullValue, proto2, deep nesting declined, and a destroyed pool's types never mistaken for a new "
          "one's [C3]",
          "[C3]") {
  auto build = [](pb::DescriptorPool* pool, const char* text) {
    pb::FileDescriptorProto proto;
    REQUIRE(pb::TextFormat::ParseFromString(text, &proto));
    const pb::FileDescriptor* file = pool->BuildFile(proto);
    REQUIRE(file != nullptr);
    return file;
  };
  (void)pb::Timestamp::descriptor();
  SECTION("a float below the normal range prints with nine digits, as protobuf's safe_strtof makes it") {
    pb::DescriptorPool pool(pb::DescriptorPool::generated_pool());
    auto* file = build(&pool, R"pb(name: "f.proto" package: "f" syntax: "proto3"
      message_type { name: "M"
        field { name: "f" number: 1 label: LABEL_OPTIONAL type: TYPE_FLOAT json_name: "f" }
        field { name: "rf" number: 2 label: LABEL_REPEATED type: TYPE_FLOAT json_name: "rf" } })pb");
    pb::DynamicMessageFactory factory(&pool);
    const pb::Descriptor* d = file->FindMessageTypeByName("M");
    for (float v : {0x1p-149f, 3e-39f, 0x1.ffff84p-127f, -1e-40f, 1.17549435e-38f, 0.1f}) {
      std::unique_ptr<pb::Message> m(factory.GetPrototype(d)->New());
      m->GetReflection()->SetFloat(m.get(), d->field(0), v);
      m->GetReflection()->AddFloat(m.get(), d->field(1), v);
      CHECK(Compare(*m) == 0);
    }
  }
  SECTION("what protobuf prints in ways of its own is declined") {
    pb::DescriptorPool pool(pb::DescriptorPool::generated_pool());
    (void)pb::Value::descriptor();
    auto* file = build(&pool, R"pb(name: "d.proto" package: "d" syntax: "proto3"
      dependency: "google/protobuf/struct.proto"
      message_type { name: "Escaped" field { name: "p" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 json_name: "q\"<x>" } }
      message_type { name: "Shared"
        field { name: "p" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 json_name: "dup" }
        field { name: "q" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "dup" } }
      message_type { name: "Null" field { name: "nv" number: 1 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".google.protobuf.NullValue" json_name: "nv" } }
      message_type { name: "R"
        field { name: "child" number: 1 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".d.R" json_name: "child" }
        field { name: "v" number: 2 label: LABEL_OPTIONAL type: TYPE_INT32 json_name: "v" } })pb");
    build(&pool, R"pb(name: "p2.proto" package: "p2" syntax: "proto2"
      message_type { name: "M" field { name: "e" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 default_value: "7" json_name: "e" } })pb");
    pb::DynamicMessageFactory factory(&pool);
    for (const char* name : {"d.Escaped", "d.Shared", "d.Null", "p2.M"}) {
      INFO(name);
      std::unique_ptr<pb::Message> m(factory.GetPrototype(pool.FindMessageTypeByName(name))->New());
      std::string out = "x";
      CHECK_FALSE(jc::PrintJson(*m, false, true, &out));
      CHECK(out == "x");
    }
    const pb::Descriptor* r = pool.FindMessageTypeByName("d.R");
    std::unique_ptr<pb::Message> root(factory.GetPrototype(r)->New());
    pb::Message* at = root.get();
    for (int depth = 0; depth < 70; ++depth) at = at->GetReflection()->MutableMessage(at, r->field(0));
    std::string out = "x";
    CHECK_FALSE(jc::PrintJson(*root, false, false, &out));  // protobuf: "Message too deep"
    CHECK(out == "x");
  }
  SECTION("another pool's types are planned afresh: a type at a destroyed one's address prints as itself") {
    for (int round = 0; round < 20; ++round) {
      pb::DescriptorPool pool(pb::DescriptorPool::generated_pool());
      auto* file = build(&pool, round % 2 == 0 ? R"pb(name: "x.proto" package: "x" syntax: "proto3"
          message_type { name: "M" field { name: "b" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 json_name: "b" } })pb"
                                               : R"pb(name: "x.proto" package: "x" syntax: "proto3"
          message_type { name: "M" field { name: "a" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "a" } })pb");
      pb::DynamicMessageFactory factory(&pool);
      const pb::Descriptor* d = file->FindMessageTypeByName("M");
      std::unique_ptr<pb::Message> m(factory.GetPrototype(d)->New());
      if (round % 2 == 0) m->GetReflection()->SetInt32(m.get(), d->field(0), 5);
      else m->GetReflection()->SetString(m.get(), d->field(0), "str");
      CHECK(Compare(*m) == 0);
    }
  }
}

TEST_CASE("a time is written as protobuf writes it: the fraction in 3, 6 or 9 digits, from year 1 to 9999, and "
          "nothing for a time outside them [C3]",
          "[C3]") {
  using google::protobuf::util::TimeUtil;
  std::mt19937_64 rng(20261206);
  std::uniform_int_distribution<int64_t> any_second(TimeUtil::kTimestampMinSeconds, TimeUtil::kTimestampMaxSeconds);
  std::uniform_int_distribution<int32_t> any_nanos(0, 999999999);
  std::vector<std::pair<int64_t, int32_t>> cases = {
      {0, 0}, {TimeUtil::kTimestampMinSeconds, 0}, {TimeUtil::kTimestampMaxSeconds, 999999999},
      {1796563506, 716000000}, {1796563506, 716123000}, {1796563506, 716123456}, {1796563506, 1},
      {-1, 999999999}, {951782400, 0} /* 2000-02-29 */};
  for (int i = 0; i < 20000; ++i) {
    int32_t nanos = any_nanos(rng);
    if (i % 3 == 0) nanos -= nanos % 1000000;  // milliseconds only
    if (i % 3 == 1) nanos -= nanos % 1000;     // microseconds
    cases.emplace_back(any_second(rng), nanos);
  }
  for (const auto& [seconds, nanos] : cases) {
    google::protobuf::Timestamp t;
    t.set_seconds(seconds);
    t.set_nanos(nanos);
    std::string ours = "kept:";
    REQUIRE(jc::AppendTimestampText(seconds, nanos, &ours));
    INFO(seconds << " s " << nanos << " ns");
    CHECK(ours == "kept:" + TimeUtil::ToString(t));
  }
  std::string out = "kept";
  CHECK_FALSE(jc::AppendTimestampText(TimeUtil::kTimestampMaxSeconds + 1, 0, &out));
  CHECK_FALSE(jc::AppendTimestampText(TimeUtil::kTimestampMinSeconds - 1, 0, &out));
  CHECK_FALSE(jc::AppendTimestampText(0, -1, &out));
  CHECK_FALSE(jc::AppendTimestampText(0, 1000000000, &out));
  CHECK(out == "kept");
}
