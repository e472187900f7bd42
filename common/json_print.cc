#include "common/json_print.h"

#include "common/utf8.h"

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace jc {
namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;

// What a field prints as.
enum class Kind { kScalar, kMessage, kTimestamp, kDuration, kMap, kUnprintable };

struct MessagePlan;

struct FieldPlan {
  const FD* field;
  std::string camel_key;  // "\"jsonName\":"
  std::string snake_key;  // "\"proto_name\":"
  Kind kind;
  // A member of a oneof, a real one or proto3 `optional`'s: printed only when set, and
  // with defaults after the others (protobuf's printer makes no placeholder for it).
  bool in_oneof;
  const MessagePlan* nested = nullptr;  // kMessage
};

struct MessagePlan {
  bool printable = true;
  std::vector<FieldPlan> by_number;    // how protobuf serializes, so prints, them
  std::vector<size_t> by_declaration;  // indexes into by_number: the order defaults print in
};

// A name that prints as it is between quotes.
bool IsPlainName(absl::string_view name) {
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return !name.empty();
}

// Deeper than this, protobuf's printer refuses ("Message too deep", at 64): left to it.
constexpr int kMaxDepth = 60;

class Plans {
 public:
  Plans() = default;
  static Plans& Get() {
    static auto* plans = new Plans();  // never destroyed: threads may print at exit
    return *plans;
  }

  const MessagePlan* For(const pb::Descriptor* d) {
    {
      absl::ReaderMutexLock lock(&mu_);
      if (auto it = plans_.find(d); it != plans_.end()) return it->second.get();
    }
    absl::MutexLock lock(&mu_);
    return BuildLocked(d);
  }

 private:
  // Builds `d`'s plan and those of the messages it holds. A type met again while it is
  // being built (a recursive message) gets the plan under construction; a plan found
  // unprintable later is checked again where it is printed.
  const MessagePlan* BuildLocked(const pb::Descriptor* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (auto it = plans_.find(d); it != plans_.end()) return it->second.get();
    MessagePlan* plan = plans_.emplace(d, std::make_unique<MessagePlan>()).first->second.get();
    // google.protobuf's types have their own mappings; proto2 has explicit defaults, groups
    // and required fields that protobuf's printer treats in ways of its own (helper-45).
    if (absl::StartsWith(d->full_name(), "google.protobuf.") || d->file()->syntax() != pb::FileDescriptor::SYNTAX_PROTO3) {
      plan->printable = false;
    }
    std::vector<FieldPlan> fields;
    absl::flat_hash_set<std::string> json_names;
    for (int i = 0; i < d->field_count(); ++i) {
      const FD* f = d->field(i);
      // A JSON name that needs escaping, or two fields sharing one JSON name (protoc allows
      // both through json_name): protobuf's printer escapes the first and, printing
      // defaults, writes the shared name once for whichever field it meets first. Such a
      // message is not printed here but by protobuf's printer itself.
      if (!IsPlainName(f->json_name()) || !json_names.insert(f->json_name()).second) plan->printable = false;
      if (f->cpp_type() == FD::CPPTYPE_ENUM && f->enum_type()->full_name() == "google.protobuf.NullValue") {
        plan->printable = false;  // prints as null
      }
      FieldPlan fp{f, absl::StrCat("\"", f->json_name(), "\":"), absl::StrCat("\"", f->name(), "\":"),
                   Kind::kScalar, f->containing_oneof() != nullptr};
      if (f->is_map()) {
        const FD* key = f->message_type()->map_key();
        const FD* value = f->message_type()->map_value();
        fp.kind = key->type() == FD::TYPE_STRING && value->cpp_type() != FD::CPPTYPE_MESSAGE ? Kind::kMap
                                                                                            : Kind::kUnprintable;
      } else if (f->cpp_type() == FD::CPPTYPE_MESSAGE) {
        const pb::Descriptor* m = f->message_type();
        // The program's own Timestamp and Duration (a pool's look-alike is someone else's).
        if (m == pb::Timestamp::descriptor() || m == pb::Duration::descriptor()) {
          fp.kind = f->is_repeated() ? Kind::kUnprintable
                                     : (m == pb::Timestamp::descriptor() ? Kind::kTimestamp : Kind::kDuration);
        } else if (absl::StartsWith(m->full_name(), "google.protobuf.")) {
          fp.kind = Kind::kUnprintable;
        } else {
          fp.kind = Kind::kMessage;
          fp.nested = BuildLocked(m);
          if (!fp.nested->printable) fp.kind = Kind::kUnprintable;
        }
      }
      if (fp.kind == Kind::kUnprintable) plan->printable = false;
      fields.push_back(std::move(fp));
    }
    std::vector<size_t> order(fields.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return fields[a].field->number() < fields[b].field->number(); });
    for (size_t i : order) plan->by_number.push_back(std::move(fields[i]));
    // by_declaration[k]: where the k-th declared field sits in by_number.
    plan->by_declaration.resize(order.size());
    for (size_t pos = 0; pos < order.size(); ++pos) plan->by_declaration[order[pos]] = pos;
    return plan;
  }

  absl::Mutex mu_;
  absl::flat_hash_map<const pb::Descriptor*, std::unique_ptr<MessagePlan>> plans_ ABSL_GUARDED_BY(mu_);
};

// protobuf's JSON string escapes (util/internal/json_escaping.cc): these code points
// beyond ASCII print as \uXXXX.
bool EscapedBeyondAscii(uint32_t cp) {
  if (cp <= 0x9f) return true;  // C1 controls (0x80-0x9f)
  switch (cp) {
    case 0xad: case 0x6dd: case 0x70f: case 0x17b4: case 0x17b5: case 0xfeff: case 0xe0001:
      return true;
    default:
      break;
  }
  return (cp >= 0x600 && cp <= 0x603) || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
         (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x206a && cp <= 0x206f) || (cp >= 0xfff9 && cp <= 0xfffb) ||
         (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0020 && cp <= 0xe007f);
}

void AppendU(uint32_t unit, std::string* out) { absl::StrAppendFormat(out, "\\u%04x", unit); }

// False when `s` is not UTF-8 (protobuf's printer has its own answer for that).
bool AppendString(absl::string_view s, std::string* out) {
  out->push_back('"');
  size_t i = 0, plain = 0;  // s[plain, i) is waiting to be copied as it is
  auto flush = [&] { out->append(s.data() + plain, i - plain); };
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      const char* esc = nullptr;
      switch (c) {
        case '\b': esc = "\\b"; break;
        case '\t': esc = "\\t"; break;
        case '\n': esc = "\\n"; break;
        case '\f': esc = "\\f"; break;
        case '\r': esc = "\\r"; break;
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        default: break;
      }
      if (esc == nullptr && c >= 0x20 && c != '<' && c != '>' && c != 0x7f) {
        ++i;
        continue;
      }
      flush();
      if (esc != nullptr) out->append(esc);
      else AppendU(c, out);
      plain = ++i;
      continue;
    }
    uint32_t cp = 0;
    int len = Utf8Sequence(s.substr(i), &cp);
    if (len == 0) return false;
    if (EscapedBeyondAscii(cp)) {
      flush();
      if (cp >= 0x10000) {
        AppendU(0xd800 + ((cp - 0x10000) >> 10), out);
        AppendU(0xdc00 + ((cp - 0x10000) & 0x3ff), out);
      } else {
        AppendU(cp, out);
      }
      i += len;
      plain = i;
      continue;
    }
    i += len;
  }
  flush();
  out->push_back('"');
  return true;
}

// protobuf's SimpleDtoa and SimpleFtoa: the shortest of 15 (6) and 17 (9) digits that
// reads back the same; not finite as JSON strings.
// A number printed in the C locale's form (a process that set another locale prints a
// comma: left to protobuf's printer, which delocalizes).
bool PlainNumber(const char* text) {
  for (const char* c = text; *c != '\0'; ++c) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(*c)) && *c != '.' && *c != 'e' && *c != '+' && *c != '-') {
      return false;
    }
  }
  return true;
}

bool AppendDouble(double v, std::string* out) {
  if (std::isnan(v)) return out->append("\"NaN\""), true;
  if (std::isinf(v)) return out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\""), true;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*g", DBL_DIG, v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof(buf), "%.*g", DBL_DIG + 2, v);
  if (!PlainNumber(buf)) return false;
  out->append(buf);
  return true;
}
bool AppendFloat(float v, std::string* out) {
  if (std::isnan(v)) return out->append("\"NaN\""), true;
  if (std::isinf(v)) return out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\""), true;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*g", FLT_DIG, v);
  // protobuf's safe_strtof: a read that sets errno (ERANGE, below the normal floats) does
  // not count as reading back the same.
  char* end = nullptr;
  errno = 0;
  float back = std::strtof(buf, &end);
  if (end == buf || *end != '\0' || errno != 0 || back != v) std::snprintf(buf, sizeof(buf), "%.*g", FLT_DIG + 3, v);
  if (!PlainNumber(buf)) return false;
  out->append(buf);
  return true;
}

// `value` as `width` decimal digits, zero-padded, at buf[at..at+width).
void PutDigits(char* buf, int at, int64_t value, int width) {
  for (int i = width - 1; i >= 0; --i, value /= 10) buf[at + i] = static_cast<char>('0' + value % 10);
}

// As protobuf: no fraction for 0, else milliseconds, microseconds or nanoseconds, whichever
// holds it (digits by hand: a format string's parse was most of the cost).
void AppendNanos(int32_t nanos, std::string* out) {
  if (nanos == 0) return;
  char buf[10];
  buf[0] = '.';
  int width = 9;
  if (nanos % 1000000 == 0) {
    nanos /= 1000000;
    width = 3;
  } else if (nanos % 1000 == 0) {
    nanos /= 1000;
    width = 6;
  }
  PutDigits(buf, 1, nanos, width);
  out->append(buf, 1 + width);
}

// Seconds and nanos of a Timestamp or Duration message.
std::pair<int64_t, int32_t> SecondsAndNanos(const pb::Message& m) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  return {r->GetInt64(m, d->field(0)), r->GetInt32(m, d->field(1))};
}

bool AppendTimestamp(const pb::Message& m, std::string* out) {
  auto [seconds, nanos] = SecondsAndNanos(m);
  if (seconds < -62135596800 || seconds > 253402300799 || nanos < 0 || nanos > 999999999) return false;
  out->push_back('"');
  AppendTimestampText(seconds, nanos, out);
  out->push_back('"');
  return true;
}

bool AppendDuration(const pb::Message& m, std::string* out) {
  auto [seconds, nanos] = SecondsAndNanos(m);
  constexpr int64_t kMax = 315576000000;
  if (seconds < -kMax || seconds > kMax || nanos <= -1000000000 || nanos >= 1000000000) return false;
  if ((seconds < 0 && nanos > 0) || (seconds > 0 && nanos < 0)) return false;
  out->push_back('"');
  if (seconds < 0 || nanos < 0) out->push_back('-');
  absl::StrAppend(out, seconds < 0 ? -seconds : seconds);
  AppendNanos(nanos < 0 ? -nanos : nanos, out);
  out->append("s\"");
  return true;
}

// One value of a scalar field (singular: index < 0; else element `index`).
bool AppendScalar(const pb::Message& m, const FD* f, int index, std::string* out) {
  const pb::Reflection* r = m.GetReflection();
  bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32:
      absl::StrAppend(out, rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
      return true;
    case FD::CPPTYPE_UINT32:
      absl::StrAppend(out, rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
      return true;
    case FD::CPPTYPE_INT64:
      absl::StrAppend(out, "\"", rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f), "\"");
      return true;
    case FD::CPPTYPE_UINT64:
      absl::StrAppend(out, "\"", rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f), "\"");
      return true;
    case FD::CPPTYPE_BOOL:
      out->append((rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false");
      return true;
    case FD::CPPTYPE_DOUBLE:
      return AppendDouble(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f), out);
    case FD::CPPTYPE_FLOAT:
      return AppendFloat(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f), out);
    case FD::CPPTYPE_ENUM: {
      int value = rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f);
      const pb::EnumValueDescriptor* named = f->enum_type()->FindValueByNumber(value);
      if (named != nullptr) absl::StrAppend(out, "\"", named->name(), "\"");
      else absl::StrAppend(out, value);  // a number no name has
      return true;
    }
    case FD::CPPTYPE_STRING: {
      std::string scratch;
      const std::string& s =
          rep ? r->GetRepeatedStringReference(m, f, index, &scratch) : r->GetStringReference(m, f, &scratch);
      if (f->type() == FD::TYPE_BYTES) {
        absl::StrAppend(out, "\"", absl::Base64Escape(s), "\"");
        return true;
      }
      return AppendString(s, out);
    }
    case FD::CPPTYPE_MESSAGE:
      return false;
  }
  return false;
}

bool AppendMessage(const pb::Message& m, const MessagePlan& plan, bool snake, bool defaults, int depth,
                   std::string* out);

// The value of field `fp` (its whole list or map when repeated).
bool AppendField(const pb::Message& m, const FieldPlan& fp, bool snake, bool defaults, int depth, std::string* out) {
  const pb::Reflection* r = m.GetReflection();
  const FD* f = fp.field;
  switch (fp.kind) {
    case Kind::kMap:
      // A map prints in protobuf's Map order, a hash order seeded per map that reflection
      // does not expose: one that holds entries is left to protobuf's printer.
      if (r->FieldSize(m, f) > 0) return false;
      out->append("{}");
      return true;
    case Kind::kMessage:
      if (f->is_repeated()) {
        out->push_back('[');
        int n = r->FieldSize(m, f);
        for (int i = 0; i < n; ++i) {
          if (i > 0) out->push_back(',');
          if (!AppendMessage(r->GetRepeatedMessage(m, f, i), *fp.nested, snake, defaults, depth + 1, out)) return false;
        }
        out->push_back(']');
        return true;
      }
      return AppendMessage(r->GetMessage(m, f), *fp.nested, snake, defaults, depth + 1, out);
    case Kind::kTimestamp:
      return AppendTimestamp(r->GetMessage(m, f), out);
    case Kind::kDuration:
      return AppendDuration(r->GetMessage(m, f), out);
    case Kind::kScalar:
      if (f->is_repeated()) {
        out->push_back('[');
        int n = r->FieldSize(m, f);
        for (int i = 0; i < n; ++i) {
          if (i > 0) out->push_back(',');
          if (!AppendScalar(m, f, i, out)) return false;
        }
        out->push_back(']');
        return true;
      }
      return AppendScalar(m, f, -1, out);
    case Kind::kUnprintable:
      return false;
  }
  return false;
}

bool Present(const pb::Message& m, const FD* f) {
  const pb::Reflection* r = m.GetReflection();
  return f->is_repeated() ? r->FieldSize(m, f) > 0 : r->HasField(m, f);
}

bool AppendMessage(const pb::Message& m, const MessagePlan& plan, bool snake, bool defaults, int depth,
                   std::string* out) {
  if (!plan.printable || depth > kMaxDepth) return false;
  out->push_back('{');
  bool first = true;
  auto put = [&](const FieldPlan& fp) {
    if (!first) out->push_back(',');
    first = false;
    out->append(snake ? fp.snake_key : fp.camel_key);
    return AppendField(m, fp, snake, defaults, depth, out);
  };
  if (!defaults) {
    // What the message holds, in number order (the order of its encoding).
    for (const FieldPlan& fp : plan.by_number) {
      if (Present(m, fp.field) && !put(fp)) return false;
    }
  } else {
    // protobuf's DefaultValueObjectWriter: a placeholder per declared field, filled as the
    // encoding is read; what finds no placeholder of its kind is added after them. Lists
    // and maps print empty; a message only when present; a Timestamp or Duration (a
    // message's placeholder, printed as a string) and a oneof's scalar after the others.
    auto last = [](const FieldPlan& fp) {
      return !fp.field->is_repeated() &&
             (fp.kind == Kind::kTimestamp || fp.kind == Kind::kDuration || (fp.in_oneof && fp.kind != Kind::kMessage));
    };
    for (size_t index : plan.by_declaration) {
      const FieldPlan& fp = plan.by_number[index];
      if (last(fp)) continue;
      if (fp.kind == Kind::kMessage && !fp.field->is_repeated() && !Present(m, fp.field)) continue;
      if (!put(fp)) return false;
    }
    for (const FieldPlan& fp : plan.by_number) {
      if (last(fp) && Present(m, fp.field) && !put(fp)) return false;
    }
  }
  out->push_back('}');
  return true;
}

}  // namespace

bool AppendTimestampText(int64_t seconds, int32_t nanos, std::string* out) {
  if (seconds < -62135596800 || seconds > 253402300799 || nanos < 0 || nanos > 999999999) return false;
  const absl::CivilSecond t = absl::ToCivilSecond(absl::FromUnixSeconds(seconds), absl::UTCTimeZone());
  // Digits written by hand: a format string's parse was most of the cost (every audit row
  // and every time in a job's JSON).
  char buf[19];  // "YYYY-MM-DDTHH:MM:SS"
  PutDigits(buf, 0, t.year(), 4);
  buf[4] = '-';
  PutDigits(buf, 5, t.month(), 2);
  buf[7] = '-';
  PutDigits(buf, 8, t.day(), 2);
  buf[10] = 'T';
  PutDigits(buf, 11, t.hour(), 2);
  buf[13] = ':';
  PutDigits(buf, 14, t.minute(), 2);
  buf[16] = ':';
  PutDigits(buf, 17, t.second(), 2);
  out->append(buf, sizeof(buf));
  AppendNanos(nanos, out);
  out->push_back('Z');
  return true;
}

bool PrintJson(const google::protobuf::Message& message, bool snake_case, bool print_defaults, std::string* out) {
  const pb::Descriptor* d = message.GetDescriptor();
  // The program's own types' plans are kept; another pool's may be destroyed and its
  // descriptors' addresses reused, so its plans live for this call only.
  std::unique_ptr<Plans> own;
  const MessagePlan* plan = nullptr;
  if (d->file()->pool() == pb::DescriptorPool::generated_pool()) {
    plan = Plans::Get().For(d);
  } else {
    own = std::make_unique<Plans>();
    plan = own->For(d);
  }
  size_t before = out->size();
  if (AppendMessage(message, *plan, snake_case, print_defaults, 0, out)) return true;
  out->resize(before);
  return false;
}

}  // namespace jc
