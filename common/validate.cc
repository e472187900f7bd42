#include "absl/strings/string_view.h"
#include "common/validate.h"

#include "common/proto_field_plan.h"
#include "common/proto_path.h"

#include <vector>


#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "google/protobuf/util/time_util.h"

namespace jc {

absl::Status CheckId(absl::string_view field, absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  if (value.size() > kMaxShortField) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be shorter than 64 bytes (got ",
                                                   value.size(), ")"));
  }
  for (char c : value) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " \"", value, "\" may only contain letters, digits, '-', '_' and '.'"));
    }
  }
  return CheckPathComponent(field, value);
}

absl::Status CheckPathComponent(absl::string_view field, absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  if (value == "." || value == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " \"", value, "\" is not allowed: it would name a directory, not an item in it"));
  }
  if (value.find('/') != absl::string_view::npos || value.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must not contain '/' or NUL"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequiredText(absl::string_view field, absl::string_view value, size_t max_bytes) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  return CheckOptionalText(field, value, max_bytes);
}

absl::Status CheckOptionalText(absl::string_view field, absl::string_view value, size_t max_bytes) {
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be at most ", max_bytes,
                                                   " bytes (got ", value.size(), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckPort(absl::string_view where, absl::string_view name, int port, absl::string_view readiness_path) {
  bool name_ok = !name.empty() && name.size() <= 15 && absl::ascii_islower(name[0]);
  for (char c : name) name_ok &= absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-';
  if (!name_ok) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".name: a letter a-z, then a-z, 0-9 or '-', at most 15 (",
                                                   "\"http\", \"jupyter\"); got \"", absl::CHexEscape(name.substr(0, 32)),
                                                   "\""));
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".port: 1 to 65535 (or 0: the center chooses), got ", port));
  }
  if (!readiness_path.empty()) {
    bool path_ok = readiness_path[0] == '/' && readiness_path.size() <= 256;
    for (char c : readiness_path) path_ok &= c > 0x20 && c < 0x7f;
    if (!path_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".readinessPath: '/' then printable ASCII without spaces, at most 256 bytes (\"/api/status\"); got \"",
          absl::CHexEscape(readiness_path.substr(0, 64)), "\""));
    }
  }
  return absl::OkStatus();
}

std::string PortEnvName(absl::string_view name) {
  std::string out = absl::StrCat("JC_PORT_", absl::AsciiStrToUpper(name));
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

std::vector<std::string> SplitList(absl::string_view list) {
  std::string normalized = absl::StrReplaceAll(list, {{"，", ","}});
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(normalized, ',')) {
    std::string item(absl::StripAsciiWhitespace(part));
    if (!item.empty()) out.push_back(std::move(item));
  }
  return out;
}

std::string JoinList(const std::vector<std::string>& items) { return absl::StrJoin(items, ","); }

namespace {

bool IsTimestamp(const google::protobuf::Descriptor* d) { return d->full_name() == "google.protobuf.Timestamp"; }

// A Timestamp field, or a message field that can lead to one (not maps: no map here holds
// times).
bool IsTimeField(const google::protobuf::FieldDescriptor* f) {
  return f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE && IsTimestamp(f->message_type());
}

const std::vector<const google::protobuf::FieldDescriptor*>& TimeFieldsOf(const google::protobuf::Descriptor* d) {
  static ProtoFieldPlans* const plans = new ProtoFieldPlans(&IsTimeField, /*through_maps=*/false);
  return plans->Of(d);
}

absl::Status CheckTimestampsAt(const google::protobuf::Message& message, ProtoPath& path, int depth) {
  using google::protobuf::FieldDescriptor;
  using google::protobuf::util::TimeUtil;
  if (depth > 64) return absl::OkStatus();  // no message here nests so deep
  const auto* reflection = message.GetReflection();
  for (const FieldDescriptor* field : TimeFieldsOf(message.GetDescriptor())) {
    const int n = field->is_repeated() ? reflection->FieldSize(message, field) : reflection->HasField(message, field);
    if (n == 0) continue;
    const bool is_time = IsTimestamp(field->message_type());
    path.Push(field);
    for (int i = 0; i < n; ++i) {
      if (field->is_repeated()) path.SetIndex(i);
      const auto& item = field->is_repeated() ? reflection->GetRepeatedMessage(message, field, i)
                                              : reflection->GetMessage(message, field);
      if (!is_time) {
        if (absl::Status s = CheckTimestampsAt(item, path, depth + 1); !s.ok()) return s;
        continue;
      }
      const auto* time = google::protobuf::DynamicCastToGenerated<google::protobuf::Timestamp>(&item);
      google::protobuf::Timestamp copy;
      if (time == nullptr) {  // a dynamic message: read it through its bytes
        copy.ParseFromString(item.SerializeAsString());
        time = &copy;
      }
      if (time->seconds() < TimeUtil::kTimestampMinSeconds || time->seconds() > TimeUtil::kTimestampMaxSeconds ||
          time->nanos() < 0 || time->nanos() > 999999999) {
        return absl::InvalidArgumentError(absl::StrCat(
            path.Render(ProtoPath::Names::kJson, /*indices=*/true),
            ": a time between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, got ", time->seconds(),
            " seconds and ", time->nanos(), " nanoseconds since 1970"));
      }
    }
    path.Pop();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTimestamps(const google::protobuf::Message& message) {
  ProtoPath path;
  return CheckTimestampsAt(message, path, 0);
}

}  // namespace jc

