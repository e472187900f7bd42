#include "common/json_fill.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "common/utf8.h"

namespace jc {
namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;
using Json = nlohmann::json;

// protobuf's parser refuses past 100 levels of objects (a map's object counts as one,
// PutMap); the gateway refuses bodies past kMaxJsonNesting (64) before they get here.
// Deeper than this is left to protobuf, which says why.
constexpr int kMaxDepth = 60;

// What a message type's keys name, built once per type: its fields by proto name and by JSON
// name. A key two fields answer to (one's name, the other's JSON name) maps to null: which
// one protobuf's parser picks is its own affair, so such a key is declined.
struct Plan {
  bool left_to_protobuf = false;
  absl::flat_hash_map<std::string, const FD*> by_key;
};

bool LeftToProtobuf(const pb::Descriptor* d) {
  // google.protobuf's types have JSON forms of their own (Timestamp as RFC 3339 text, Struct
  // as any JSON, wrappers as their value); proto2 has closed enums, groups and defaults that
  // protobuf's parser treats in ways of its own.
  return d->file()->syntax() != pb::FileDescriptor::SYNTAX_PROTO3 || absl::StartsWith(d->full_name(), "google.protobuf.");
}

std::unique_ptr<Plan> MakePlan(const pb::Descriptor* d) {
  auto plan = std::make_unique<Plan>();
  plan->left_to_protobuf = LeftToProtobuf(d);
  auto add = [&](const std::string& key, const FD* f) {
    auto [it, added] = plan->by_key.try_emplace(key, f);
    if (!added && it->second != f) it->second = nullptr;
  };
  for (int i = 0; i < d->field_count(); ++i) {
    const FD* f = d->field(i);
    add(f->name(), f);
    add(f->json_name(), f);
  }
  return plan;
}

// Per thread, so no lock on the request path; the program's own types only (their
// descriptors live as long as the program, so an address is never another type's).
const Plan& PlanOf(const pb::Descriptor* d) {
  thread_local absl::flat_hash_map<const pb::Descriptor*, std::unique_ptr<Plan>> plans;
  auto& plan = plans[d];
  if (plan == nullptr) plan = MakePlan(d);
  return *plan;
}

// A JSON integer within [lo, hi]. nlohmann holds a non-negative integer as unsigned, a
// negative one as signed, a number with a fraction or an exponent as a double: protobuf's
// parser reads "1.0" or "1e2" into an integer field too, but only where no digit is lost,
// which is left to it.
bool IntegerIn(const Json& v, int64_t lo, int64_t hi, int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return false;
    *out = static_cast<int64_t>(u);
    return *out >= lo;
  }
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return *out >= lo && *out <= hi;
  }
  return false;
}

// A 64-bit integer as protobuf prints one, in a string ("-42"): read by protobuf's parser
// with safe_strto64/safe_strtou64. Only the plain form is read here (an optional minus, no
// leading zero, at most 20 digits); a sign, a space, a fraction or an exponent is left to it.
bool DecimalText(const Json& v, bool* negative, uint64_t* magnitude) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  *negative = !s.empty() && s[0] == '-';
  const size_t start = *negative ? 1 : 0;
  const size_t digits = s.size() - start;
  if (digits == 0 || digits > 20 || (s[start] == '0' && (digits > 1 || *negative))) return false;
  uint64_t x = 0;
  for (size_t i = start; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(s[i] - '0');
    if (x > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    x = x * 10 + digit;
  }
  *magnitude = x;
  return true;
}

bool Signed64(const Json& v, int64_t* out) {
  bool negative = false;
  uint64_t magnitude = 0;
  if (!v.is_string()) return IntegerIn(v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), out);
  if (!DecimalText(v, &negative, &magnitude)) return false;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (magnitude > kMax + (negative ? 1 : 0)) return false;
  *out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

bool Unsigned64(const Json& v, uint64_t* out) {
  if (v.is_string()) {
    bool negative = false;
    return DecimalText(v, &negative, out) && !negative;
  }
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

// A double as protobuf's parser reads the text nlohmann writes for it: a double is written
// with the shortest digits that read back to it, and read back by strtod; an integer is read
// as one and refused where a double would not hold it exactly (past 2^53 this reader leaves
// it). A double nlohmann holds that is not finite is written as `null`.
bool DoubleOf(const Json& v, double* out) {
  constexpr int64_t kExact = int64_t{1} << 53;
  if (v.is_number_float()) {
    *out = v.get<double>();
    return std::isfinite(*out);
  }
  int64_t i = 0;
  if (!IntegerIn(v, -kExact, kExact, &i)) return false;
  *out = static_cast<double>(i);
  return true;
}

class Filler {
 public:
  bool Fill(const Json& object, pb::Message* m, int depth) {
    if (depth > kMaxDepth || !object.is_object()) return false;
    const pb::Descriptor* d = m->GetDescriptor();
    const Plan& plan = PlanOf(d);
    if (plan.left_to_protobuf) return false;
    absl::InlinedVector<const FD*, 16> seen;
    absl::InlinedVector<const pb::OneofDescriptor*, 4> oneofs;
    for (const auto& [key, value] : object.items()) {
      auto it = plan.by_key.find(key);
      if (it == plan.by_key.end() || it->second == nullptr) return false;
      const FD* f = it->second;
      // Named twice (`center_ids` and `centerIDs`), or a oneof's second member.
      if (std::find(seen.begin(), seen.end(), f) != seen.end()) return false;
      seen.push_back(f);
      if (const pb::OneofDescriptor* o = f->containing_oneof()) {
        if (std::find(oneofs.begin(), oneofs.end(), o) != oneofs.end()) return false;
        oneofs.push_back(o);
      }
      if (value.is_null()) return false;
      if (f->is_map()) {
        if (!PutMap(value, f, m, depth)) return false;
      } else if (f->is_repeated()) {
        if (!value.is_array()) return false;
        for (const Json& element : value) {
          if (!Put(element, f, m, depth, /*add=*/true)) return false;
        }
      } else if (!Put(value, f, m, depth, /*add=*/false)) {
        return false;
      }
    }
    return true;
  }

 private:
  // A map with string keys: a JSON object, each member an entry (nlohmann keeps one member
  // per key, as protobuf's Map keeps one entry). Keys of another type are text protobuf's
  // parser converts in its own way: left to it.
  bool PutMap(const Json& object, const FD* f, pb::Message* m, int depth) {
    const pb::Descriptor* entry = f->message_type();
    const FD* key = entry->map_key();
    const FD* value = entry->map_value();
    if (!object.is_object() || key->type() != FD::TYPE_STRING) return false;
    const pb::Reflection* r = m->GetReflection();
    for (const auto& [k, v] : object.items()) {
      if (v.is_null() || !IsUtf8(k)) return false;
      pb::Message* e = r->AddMessage(m, f);
      e->GetReflection()->SetString(e, key, k);
      // The map's object is a level of its own, as protobuf's parser counts them (a
      // recursive message through a map nests two objects a level: attacker helper-61).
      if (!Put(v, value, e, depth + 1, /*add=*/false)) return false;
    }
    return true;
  }

  // Sets (or, for a repeated field, adds) `v` as `f`'s value.
  bool Put(const Json& v, const FD* f, pb::Message* m, int depth, bool add) {
    const pb::Reflection* r = m->GetReflection();
    int64_t i = 0;
    switch (f->type()) {
      case FD::TYPE_STRING:
        // nlohmann's parser takes only UTF-8; a document built in code may hold any bytes,
        // which dump() throws on (attacker helper-61): left to that path.
        if (!v.is_string() || !IsUtf8(v.get_ref<const std::string&>())) return false;
        add ? r->AddString(m, f, v.get_ref<const std::string&>()) : r->SetString(m, f, v.get_ref<const std::string&>());
        return true;
      case FD::TYPE_BOOL:
        if (!v.is_boolean()) return false;
        add ? r->AddBool(m, f, v.get<bool>()) : r->SetBool(m, f, v.get<bool>());
        return true;
      case FD::TYPE_INT32:
      case FD::TYPE_SINT32:
      case FD::TYPE_SFIXED32: {
        if (!IntegerIn(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), &i)) return false;
        const auto x = static_cast<int32_t>(i);
        add ? r->AddInt32(m, f, x) : r->SetInt32(m, f, x);
        return true;
      }
      case FD::TYPE_UINT32:
      case FD::TYPE_FIXED32: {
        if (!IntegerIn(v, 0, std::numeric_limits<uint32_t>::max(), &i)) return false;
        const auto x = static_cast<uint32_t>(i);
        add ? r->AddUInt32(m, f, x) : r->SetUInt32(m, f, x);
        return true;
      }
      case FD::TYPE_INT64:
      case FD::TYPE_SINT64:
      case FD::TYPE_SFIXED64:
        if (!Signed64(v, &i)) return false;
        add ? r->AddInt64(m, f, i) : r->SetInt64(m, f, i);
        return true;
      case FD::TYPE_UINT64:
      case FD::TYPE_FIXED64: {
        uint64_t u = 0;
        if (!Unsigned64(v, &u)) return false;
        add ? r->AddUInt64(m, f, u) : r->SetUInt64(m, f, u);
        return true;
      }
      case FD::TYPE_DOUBLE: {
        double x = 0;
        if (!DoubleOf(v, &x)) return false;
        add ? r->AddDouble(m, f, x) : r->SetDouble(m, f, x);
        return true;
      }
      case FD::TYPE_ENUM: {
        // By its name, exactly (protobuf's parser tries that first); google.protobuf.NullValue
        // reads `null`, which is declined above.
        if (!v.is_string() || f->enum_type()->full_name() == "google.protobuf.NullValue") return false;
        const pb::EnumValueDescriptor* e = f->enum_type()->FindValueByName(v.get_ref<const std::string&>());
        if (e == nullptr) return false;
        add ? r->AddEnumValue(m, f, e->number()) : r->SetEnumValue(m, f, e->number());
        return true;
      }
      case FD::TYPE_MESSAGE:
        if (!v.is_object() || LeftToProtobuf(f->message_type())) return false;
        return Fill(v, add ? r->AddMessage(m, f) : r->MutableMessage(m, f), depth + 1);
      default:  // float (protobuf rounds and range-checks it its own way), bytes (base64), groups
        return false;
    }
  }
};

}  // namespace

bool FillFromJson(const nlohmann::json& doc, google::protobuf::Message* message) {
  message->Clear();
  if (message->GetDescriptor()->file()->pool() != pb::DescriptorPool::generated_pool()) return false;
  if (Filler().Fill(doc, message, 0)) return true;
  message->Clear();
  return false;
}

}  // namespace jc
