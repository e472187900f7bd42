#pragma once

// Messages of the API filled at random, for tests that hold two implementations of
// protobuf's JSON mapping against each other (json_print_test.cc, json_fill_test.cc): edge
// numbers, NaN and ±0, every kind of character, empty and full lists and maps, unknown
// enum numbers, Timestamps and Durations at their edges.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jointcloud/adapter/v1/adapter.pb.h"
#include "jointcloud/v1/accounting.pb.h"
#include "jointcloud/v1/catalog.pb.h"
#include "jointcloud/v1/common.pb.h"
#include "jointcloud/v1/datamon.pb.h"
#include "jointcloud/v1/identity.pb.h"
#include "jointcloud/v1/job_record.pb.h"
#include "jointcloud/v1/jobs.pb.h"
#include "jointcloud/v1/monitor.pb.h"
#include "jointcloud/v1/registry.pb.h"
#include "jointcloud/v1/scheduler.pb.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::testing {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;

inline std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Fills messages with what the printers must agree on: edge numbers, every kind of
// character, empty and full lists and maps, unknown enum numbers.
class Filler {
 public:
  explicit Filler(uint32_t seed) : rng_(seed) {}

  void Fill(pb::Message* m, int depth = 0) {
    const pb::Descriptor* d = m->GetDescriptor();
    const pb::Reflection* r = m->GetReflection();
    if (d->full_name() == "google.protobuf.Timestamp") {
      r->SetInt64(m, d->field(0), Pick<int64_t>({0, -62135596800, 253402300799, 1700000000, Int(-62135596800, 253402300799)}));
      r->SetInt32(m, d->field(1), Pick<int32_t>({0, 5000000, 5000, 5, 999999999, static_cast<int32_t>(Int(0, 999999999))}));
      return;
    }
    if (d->full_name() == "google.protobuf.Duration") {
      int64_t s = Pick<int64_t>({0, 1, -3, 315576000000, -315576000000, Int(-1000000, 1000000)});
      int32_t n = Pick<int32_t>({0, 500, 5000000, 999999999, static_cast<int32_t>(Int(0, 999999999))});
      if (s < 0 || (s == 0 && Chance(0.5))) n = -n;
      r->SetInt64(m, d->field(0), s);
      r->SetInt32(m, d->field(1), n);
      return;
    }
    for (int i = 0; i < d->field_count(); ++i) {
      const FD* f = d->field(i);
      if (!Chance(0.6)) continue;
      if (f->containing_oneof() != nullptr && Chance(0.5)) continue;
      if (f->is_repeated()) {
        int n = f->is_map() ? static_cast<int>(Chance(0.7) ? 0 : Int(1, 5)) : static_cast<int>(Int(0, 3));
        for (int k = 0; k < n; ++k) Add(m, f, depth);
      } else {
        Set(m, f, depth);
      }
    }
  }

 private:
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int64_t Int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return *(values.begin() + Int(0, static_cast<int64_t>(values.size()) - 1));
  }
  double Double() {
    switch (Int(0, 7)) {
      case 0: return 0.0;
      case 1: return -0.0;
      case 2: return std::numeric_limits<double>::quiet_NaN();
      case 3: return Chance(0.5) ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
      case 4: return static_cast<double>(Int(-1000000, 1000000)) / 8;
      case 5: return Pick<double>({0.1, 1e21, 1e-7, 123456789012345678.0, 5e-324, 1.7976931348623157e308, 100, 0.3});
      default: return std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng_), static_cast<int>(Int(-60, 80)));
    }
  }
  std::string Text() {
    std::string s;
    int n = static_cast<int>(Int(0, 12));
    for (int i = 0; i < n; ++i) {
      switch (Int(0, 5)) {
        case 0: s += static_cast<char>(Int(0, 0x7f)); break;  // NUL and every ASCII escape
        case 1: s += Pick<char>({'"', '\\', '<', '>', '&', '\'', '/', '\n', '\t', 0x7f}); break;
        case 2: s += Utf8(static_cast<uint32_t>(Int(0x80, 0x7ff))); break;
        case 3: s += Utf8(Pick<uint32_t>({0xad, 0x600, 0x6dd, 0x200b, 0x2028, 0x2029, 0x202e, 0x2060, 0xfeff, 0xfffb,
                                          0x1d173, 0xe0001, 0xe007f, 0xe9, 0x1f600, 0xffff, 0x10ffff})); break;
        default: s += static_cast<char>(Int('a', 'z')); break;
      }
    }
    return s;
  }
  std::string Bytes() {
    std::string s;
    int n = static_cast<int>(Int(0, 9));
    for (int i = 0; i < n; ++i) s += static_cast<char>(Int(0, 255));
    return s;
  }
  int Enum(const FD* f) {
    if (Chance(0.15)) return static_cast<int>(Int(50, 1000));  // a number no name has
    const pb::EnumDescriptor* e = f->enum_type();
    return e->value(static_cast<int>(Int(0, e->value_count() - 1)))->number();
  }

  void Set(pb::Message* m, const FD* f, int depth) {
    const pb::Reflection* r = m->GetReflection();
    switch (f->cpp_type()) {
      case FD::CPPTYPE_INT32: r->SetInt32(m, f, static_cast<int32_t>(Pick<int64_t>({0, -1, 1, INT32_MIN, INT32_MAX, Int(-99999, 99999)}))); break;
      case FD::CPPTYPE_UINT32: r->SetUInt32(m, f, static_cast<uint32_t>(Pick<int64_t>({0, 1, UINT32_MAX, Int(0, 99999)}))); break;
      case FD::CPPTYPE_INT64: r->SetInt64(m, f, Pick<int64_t>({0, -1, INT64_MIN, INT64_MAX, Int(-(int64_t{1} << 60), int64_t{1} << 60)})); break;
      case FD::CPPTYPE_UINT64: r->SetUInt64(m, f, Pick<uint64_t>({0, 1, UINT64_MAX, static_cast<uint64_t>(Int(0, INT64_MAX))})); break;
      case FD::CPPTYPE_DOUBLE: r->SetDouble(m, f, Double()); break;
      case FD::CPPTYPE_FLOAT: r->SetFloat(m, f, static_cast<float>(Double())); break;
      case FD::CPPTYPE_BOOL: r->SetBool(m, f, Chance(0.5)); break;
      case FD::CPPTYPE_ENUM: r->SetEnumValue(m, f, Enum(f)); break;
      case FD::CPPTYPE_STRING: r->SetString(m, f, f->type() == FD::TYPE_BYTES ? Bytes() : Text()); break;
      case FD::CPPTYPE_MESSAGE: {
        pb::Message* sub = r->MutableMessage(m, f);
        if (depth < 4) Fill(sub, depth + 1);
        break;
      }
    }
  }
  void Add(pb::Message* m, const FD* f, int depth) {
    const pb::Reflection* r = m->GetReflection();
    switch (f->cpp_type()) {
      case FD::CPPTYPE_INT32: r->AddInt32(m, f, static_cast<int32_t>(Int(-99999, 99999))); break;
      case FD::CPPTYPE_UINT32: r->AddUInt32(m, f, static_cast<uint32_t>(Int(0, 99999))); break;
      case FD::CPPTYPE_INT64: r->AddInt64(m, f, Int(INT64_MIN, INT64_MAX)); break;
      case FD::CPPTYPE_UINT64: r->AddUInt64(m, f, static_cast<uint64_t>(Int(0, INT64_MAX)) * 2); break;
      case FD::CPPTYPE_DOUBLE: r->AddDouble(m, f, Double()); break;
      case FD::CPPTYPE_FLOAT: r->AddFloat(m, f, static_cast<float>(Double())); break;
      case FD::CPPTYPE_BOOL: r->AddBool(m, f, Chance(0.5)); break;
      case FD::CPPTYPE_ENUM: r->AddEnumValue(m, f, Enum(f)); break;
      case FD::CPPTYPE_STRING: r->AddString(m, f, f->type() == FD::TYPE_BYTES ? Bytes() : Text()); break;
      case FD::CPPTYPE_MESSAGE: {
        pb::Message* sub = r->AddMessage(m, f);
        if (f->is_map()) {
          // A map entry: a fresh key (the printers agree on a map, not on duplicate keys).
          const pb::Reflection* er = sub->GetReflection();
          er->SetString(sub, sub->GetDescriptor()->map_key(), absl::StrCat("k", Int(0, 1000000), Text()));
          Set(sub, sub->GetDescriptor()->map_value(), depth);
        } else if (depth < 4) {
          Fill(sub, depth + 1);
        }
        break;
      }
    }
  }

  std::mt19937 rng_;
};

inline void AllMessages(const pb::Descriptor* d, std::vector<const pb::Descriptor*>* out) {
  if (d->options().map_entry()) return;
  out->push_back(d);
  for (int i = 0; i < d->nested_type_count(); ++i) AllMessages(d->nested_type(i), out);
}

inline std::vector<const pb::Descriptor*> ApiMessages() {
  // Linked in: a static library's file that nothing names would not be in the pool.
  (void)jointcloud::v1::UsageRecord::descriptor();
  (void)jointcloud::v1::JobRecord::descriptor();
  (void)jointcloud::v1::TrainJob::descriptor();
  (void)jointcloud::adapter::v1::Replica::descriptor();
  (void)nexec::v1::Job::descriptor();
  (void)jointcloud::v1::ResourceSpec::descriptor();
  (void)jointcloud::v1::DownloadState::descriptor();
  (void)jointcloud::v1::CenterUsage::descriptor();
  (void)jointcloud::v1::GetAlgorithmScoreRequest::descriptor();
  (void)jointcloud::v1::Membership::descriptor();
  (void)jointcloud::v1::Center::descriptor();
  (void)jointcloud::v1::ComputingResources::descriptor();
  std::vector<const pb::Descriptor*> out;
  for (const char* file :
       {"jointcloud/v1/common.proto", "jointcloud/v1/registry.proto", "jointcloud/v1/catalog.proto",
        "jointcloud/v1/datamon.proto", "jointcloud/v1/monitor.proto", "jointcloud/v1/scheduler.proto",
        "jointcloud/v1/jobs.proto", "jointcloud/v1/job_record.proto", "jointcloud/v1/identity.proto",
        "jointcloud/v1/accounting.proto", "jointcloud/adapter/v1/adapter.proto", "nexec/v1/nexec.proto"}) {
    const pb::FileDescriptor* fd = pb::DescriptorPool::generated_pool()->FindFileByName(file);
    INFO(file);
    REQUIRE(fd != nullptr);
    for (int i = 0; i < fd->message_type_count(); ++i) AllMessages(fd->message_type(i), &out);
  }
  return out;
}

}  // namespace jc::testing
