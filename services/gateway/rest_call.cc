#include "services/gateway/rest_call.h"
#include "common/json_depth.h"
#include "common/validate.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/timestamp.h"
#include "services/gateway/unknown_field.h"

namespace jc::gateway {
namespace {

thread_local const httplib::Request* serving = nullptr;
thread_local const std::string* serving_id = nullptr;
thread_local const std::function<void(std::function<void()>)>* serving_on_stop = nullptr;

}  // namespace

ServingRequest::ServingRequest(const httplib::Request& request, const std::string& request_id,
                               std::function<void(std::function<void()>)> on_stop)
    : on_stop_(std::move(on_stop)) {
  serving = &request;
  serving_id = &request_id;
  serving_on_stop = on_stop_ ? &on_stop_ : nullptr;
}
ServingRequest::~ServingRequest() {
  serving = nullptr;
  serving_id = nullptr;
  serving_on_stop = nullptr;
}

void CancelOnStop(std::function<void()> cancel) {
  if (serving_on_stop != nullptr) (*serving_on_stop)(std::move(cancel));
}

void PrepareContext(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + kRpcTimeout);
  if (serving == nullptr) return;
  if (const std::string* authorization = FindHeader(*serving, "Authorization")) {
    ctx->AddMetadata("authorization", *authorization);
  }
  ctx->AddMetadata("x-forwarded-for", serving->remote_addr);
  ctx->AddMetadata(auth::kViaRestMetadata, "1");
  if (serving_id != nullptr && !serving_id->empty()) ctx->AddMetadata("x-request-id", *serving_id);
}

bool IsForwardableHeaderValue(absl::string_view value) {
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

ServingFacts CurrentServingFacts() {
  ServingFacts facts;
  if (serving == nullptr) return facts;
  if (const std::string* authorization = FindHeader(*serving, "Authorization")) facts.authorization = *authorization;
  facts.forwarded_for = serving->remote_addr;
  if (serving_id != nullptr) facts.request_id = *serving_id;
  return facts;
}

namespace {


// A map of strings written with numbers (`"resource_quantity": {"cpu": 16}`, as YAML and
// people write quantities) takes them as their text: protobuf's JSON mapping would refuse
// them with a message about JSON types (issue 33).
void NumbersToStringsInStringMaps(nlohmann::json& doc, const google::protobuf::Descriptor* desc) {
  using google::protobuf::FieldDescriptor;
  for (auto& [key, value] : doc.items()) {
    const FieldDescriptor* field = FieldOfJsonKey(desc, key);
    if (field == nullptr || field->type() != FieldDescriptor::TYPE_MESSAGE) continue;
    if (field->is_map()) {
      if (!value.is_object() || field->message_type()->map_value()->type() != FieldDescriptor::TYPE_STRING) continue;
      for (auto& [k, v] : value.items()) {
        if (v.is_number_integer() || v.is_number_float() || v.is_boolean()) v = v.dump();
      }
    } else if (field->is_repeated() && value.is_array()) {
      for (auto& item : value) {
        if (item.is_object()) NumbersToStringsInStringMaps(item, field->message_type());
      }
    } else if (value.is_object()) {
      NumbersToStringsInStringMaps(value, field->message_type());
    }
  }
}

// Whether `text` has the shape protobuf's Timestamp parser reads as absl does: absl's parse
// also takes a NUL and junk after it, a lower-case 't' or 'z', a leap second (23:59:60) and
// fractions past nanoseconds — protobuf then refuses the first ones in its own words, or
// cuts the last silently (helper-47 F4, F5).
bool InstantAsProtobufReadsIt(const std::string& text) {
  if (text.size() < 20 || text[10] != 'T' || text.compare(17, 2, "60") == 0) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '-' && c != ':' && c != '.' && c != '+' &&
        c != 'T' && c != 'Z') {
      return false;
    }
  }
  if (size_t dot = text.find('.'); dot != std::string::npos) {
    size_t digits = 0;
    while (dot + 1 + digits < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[dot + 1 + digits]))) {
      ++digits;
    }
    if (digits == 0 || digits > 9) return false;
  }
  return true;
}

// `text` as the RFC 3339 instant protobuf reads: a date (`2026-12-01`) is its midnight UTC,
// an instant stays as written; anything else is refused naming `field`.
absl::StatusOr<std::string> AsInstant(const std::string& field, const std::string& text) {
  absl::CivilDay day;
  // (absl would take 2026-13-01 for 2027-01-01: only a date that prints back as written)
  if (text.size() == 10 && absl::ParseCivilTime(text, &day) && absl::FormatCivilTime(day) == text) {
    return text + "T00:00:00Z";
  }
  absl::Time at;
  std::string why;
  if (!InstantAsProtobufReadsIt(text) || !absl::ParseTime(absl::RFC3339_full, text, &at, &why)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", text.substr(0, 64),
                     "\" is neither a date (2026-12-01, midnight UTC) nor an instant with its zone (2026-12-01T08:00:00Z, "
                     "2026-12-01T16:00:00+08:00)"));
  }
  return text;
}

// A time (google.protobuf.Timestamp) written as a date, `2026-12-01`, is that day's
// midnight UTC, as the docs write dates; one that is neither a date nor an RFC 3339
// instant is refused naming the field, not with protobuf's "Failed to parse timestamp".
absl::Status DatesInTimestamps(nlohmann::json& doc, const google::protobuf::Descriptor* desc,
                               const std::string& path, int depth = 0) {
  using google::protobuf::FieldDescriptor;
  if (depth > 32) return absl::OkStatus();
  for (auto& [key, value] : doc.items()) {
    const FieldDescriptor* field = FieldOfJsonKey(desc, key);
    if (field == nullptr || field->type() != FieldDescriptor::TYPE_MESSAGE || field->is_map()) continue;
    // Named as the body names it (snake_case in the catalog's API, lowerCamel in the jobs').
    const std::string here = path.empty() ? key : absl::StrCat(path, ".", key);
    if (field->message_type()->full_name() == "google.protobuf.Timestamp") {
      if (!value.is_string()) continue;  // protobuf's parser says what it wants
      const std::string text = value.get<std::string>();
      JC_ASSIGN_OR_RETURN(const std::string instant, AsInstant(here, text));
      if (instant != text) value = instant;
      continue;
    }
    if (field->is_repeated() && value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_object()) continue;
        JC_RETURN_IF_ERROR(DatesInTimestamps(value[i], field->message_type(), absl::StrCat(here, "[", i, "]"), depth + 1));
      }
    } else if (value.is_object()) {
      JC_RETURN_IF_ERROR(DatesInTimestamps(value, field->message_type(), here, depth + 1));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseBody(const httplib::Request& request, google::protobuf::Message* message,
                       google::protobuf::FieldMask* mask) {
  // No body (or only white space) is `{}` for a POST or DELETE: `curl -X POST …/stop`
  // sends none, and a request that needs fields says which are missing. A PUT or PATCH
  // sets what its body says: without one it would set every field to its default (an
  // empty update mask is "every field"), so it is refused.
  const bool blank = request.body.find_first_not_of(" \t\r\n") == std::string::npos;
  if (blank && (request.method == "PUT" || request.method == "PATCH")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", request.method,
        " needs a body: the fields to set, as a JSON object (a body sent without Content-Length or chunked "
        "encoding is not read)"));
  }
  // Deeper nesting than any message here has is refused before a recursive walk or dump()
  // meets it (a body 400,000 levels deep ran the stack out, before any credential check).
  if (NestsDeeperThan(request.body, kMaxJsonNesting)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body nests arrays and objects deeper than ", kMaxJsonNesting, " levels"));
  }
  nlohmann::json doc = blank ? nlohmann::json::object()
                             : nlohmann::json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("malformed JSON body");
  if (!doc.is_object()) return absl::InvalidArgumentError("request body must be a JSON object");
  // A field the message lacks, said with where it is and the name meant (protobuf's parser
  // says only "Cannot find field.").
  if (auto unknown = FindUnknownField(doc, message->GetDescriptor())) {
    return absl::InvalidArgumentError(unknown->Message());
  }
  NumbersToStringsInStringMaps(doc, message->GetDescriptor());
  JC_RETURN_IF_ERROR(DatesInTimestamps(doc, message->GetDescriptor(), ""));
  JC_RETURN_IF_ERROR(JsonDocToProto(doc, message));
  // protobuf's parser takes 9999-12-31T23:59:59-01:00, a time its printer then refuses.
  JC_RETURN_IF_ERROR(CheckTimestamps(*message));
  if (mask != nullptr) {
    const auto* desc = message->GetDescriptor();
    for (const auto& item : doc.items()) {
      if (const auto* field = FieldOfJsonKey(desc, item.key()); field != nullptr) mask->add_paths(field->name());
    }
  }
  return absl::OkStatus();
}

absl::Status QueryInt(const httplib::Request& request, const std::string& name, int32_t* out) {
  if (!request.has_param(name.c_str())) return absl::OkStatus();
  std::string value = request.get_param_value(name.c_str());
  if (!absl::SimpleAtoi(value, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("query parameter ", name, " must be an integer; got \"", value, "\""));
  }
  return absl::OkStatus();
}

absl::Status QueryTime(const httplib::Request& request, const std::string& name, google::protobuf::Timestamp* out) {
  if (!request.has_param(name.c_str())) return absl::OkStatus();
  JC_ASSIGN_OR_RETURN(const std::string instant, AsInstant(name, request.get_param_value(name.c_str())));
  absl::Time at;
  std::string why;
  if (!absl::ParseTime(absl::RFC3339_full, instant, &at, &why)) return absl::InvalidArgumentError(why);
  if (at < absl::FromUnixSeconds(-62135596800) || at > absl::FromUnixSeconds(253402300799)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": a time between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"));
  }
  *out = ToTimestamp(at);
  return absl::OkStatus();
}

std::string QueryString(const httplib::Request& request, const std::string& name) {
  return request.has_param(name.c_str()) ? request.get_param_value(name.c_str()) : std::string();
}

}  // namespace jc::gateway
