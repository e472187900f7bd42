#include "services/gateway/openapi.h"

#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "jointcloud/v1/options.pb.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace jc::gateway {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using nlohmann::json;

class SchemaBuilder {
 public:
  // Returns a JSON-schema reference for `desc`, defining it (and what it uses) once.
  json Ref(const Descriptor* desc, JsonNames names) {
    std::string key = SchemaName(desc, names);
    if (!schemas_.contains(key)) {
      schemas_[key] = json::object();  // placeholder breaks recursion
      schemas_[key] = Define(desc, names);
    }
    return {{"$ref", "#/components/schemas/" + key}};
  }

  const json& schemas() const { return schemas_; }

 private:
  static std::string SchemaName(const Descriptor* desc, JsonNames names) {
    return names == JsonNames::kCamelCase ? desc->full_name() + ".camel" : desc->full_name();
  }

  json Define(const Descriptor* desc, JsonNames names) {
    json props = json::object();
    for (int i = 0; i < desc->field_count(); ++i) {
      const FieldDescriptor* f = desc->field(i);
      std::string name = names == JsonNames::kCamelCase ? f->json_name() : f->name();
      props[name] = Field(f, names);
    }
    return {{"type", "object"}, {"properties", props}};
  }

  json Field(const FieldDescriptor* f, JsonNames names) {
    if (f->is_map()) {
      return {{"type", "object"},
              {"additionalProperties", Single(f->message_type()->map_value(), names)}};
    }
    if (f->is_repeated()) return {{"type", "array"}, {"items", Single(f, names)}};
    return Single(f, names);
  }

  json Single(const FieldDescriptor* f, JsonNames names) {
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        if (f->options().GetExtension(::jointcloud::v1::decimal)) {
          // An exact decimal (common/price.h): answered as a number; a body may give a
          // number or its text.
          return {{"type", "number"},
                  {"description", "an exact decimal of at most six decimals (a number, or its text: \"0.75\")"}};
        }
        return f->type() == FieldDescriptor::TYPE_BYTES
                   ? json{{"type", "string"}, {"format", "byte"}}
                   : json{{"type", "string"}};
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_UINT32:
        return {{"type", "integer"}, {"format", "int32"}};
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT64:
        // Protobuf's JSON mapping writes 64-bit integers as strings.
        return {{"type", "string"}, {"format", "int64"}};
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT:
        return {{"type", "number"}};
      case FieldDescriptor::CPPTYPE_BOOL:
        return {{"type", "boolean"}};
      case FieldDescriptor::CPPTYPE_ENUM: {
        json values = json::array();
        for (int i = 0; i < f->enum_type()->value_count(); ++i) {
          values.push_back(f->enum_type()->value(i)->name());
        }
        return {{"type", "string"}, {"enum", values}};
      }
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        const std::string& type = f->message_type()->full_name();
        if (type == "google.protobuf.Timestamp") return {{"type", "string"}, {"format", "date-time"}};
        if (type == "google.protobuf.FieldMask") return {{"type", "string"}};
        if (type == "google.protobuf.Empty") return {{"type", "object"}};
        return Ref(f->message_type(), names);
      }
    }
    return json::object();
  }

  json schemas_ = json::object();
};

// "get" + /openapi/v1/centers/{ai_center_id}/heartbeat -> "getCentersByAiCenterIdHeartbeat":
// URL-safe (letters and digits only), what code generators name their methods.
std::string OperationId(const std::string& method, const std::string& path) {
  std::string id = absl::AsciiStrToLower(method);
  for (absl::string_view segment : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (segment == "openapi" || segment == "v1") continue;
    const bool param = absl::ConsumePrefix(&segment, "{") && absl::ConsumeSuffix(&segment, "}");
    if (param) id += "By";
    bool upper = true;
    for (char c : segment) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) {
        upper = true;
        continue;
      }
      id += upper ? absl::ascii_toupper(static_cast<unsigned char>(c)) : c;
      upper = false;
    }
  }
  return id;
}

// The envelope an error answers with, as a response of the operation.
json ErrorResponse(const std::string& description) {
  return {{"description", description},
          {"content", {{"application/json", {{"schema", {{"$ref", "#/components/schemas/Error"}}}}}}}};
}

}  // namespace

std::string BuildOpenApi(const std::vector<Route>& routes, const std::string& version) {
  SchemaBuilder schemas;
  std::set<std::string> operation_ids;
  json paths = json::object();
  static const std::regex kParam(R"(\{([^}]+)\})");
  for (const Route& r : routes) {
    json op;
    op["summary"] = r.summary;
    op["tags"] = json::array({r.tag});
    std::string id = OperationId(r.method, r.path);
    for (int n = 2; !operation_ids.insert(id).second; ++n) id = absl::StrCat(OperationId(r.method, r.path), n);
    op["operationId"] = id;
    json params = json::array();
    for (auto it = std::sregex_iterator(r.path.begin(), r.path.end(), kParam);
         it != std::sregex_iterator(); ++it) {
      params.push_back({{"name", (*it)[1].str()},
                        {"in", "path"},
                        {"required", true},
                        {"schema", {{"type", "string"}}}});
    }
    for (const QueryParam& q : r.query) {
      params.push_back({{"name", q.name},
                        {"in", "query"},
                        {"required", false},
                        {"description", q.description},
                        {"schema", {{"type", q.type}}}});
    }
    if (!params.empty()) op["parameters"] = params;
    if (r.body != nullptr) {
      op["requestBody"] = {
          {"required", true},
          {"content", {{"application/json", {{"schema", schemas.Ref(r.body, r.names)}}}}}};
    }
    json data = r.data != nullptr ? schemas.Ref(r.data, r.names) : json{{"type", "object"}, {"nullable", true}};
    json envelope = {{"type", "object"},
                     {"required", {"status", "code", "errorMsg", "data"}},
                     {"properties",
                      {{"status", {{"type", "integer"}}},
                       {"code", {{"type", "string"}}},
                       {"errorMsg", {{"type", "string"}}},
                       {"data", data}}}};
    json ok = {{"description", "OK"}, {"content", {{"application/json", {{"schema", envelope}}}}}};
    if (r.event_stream) {
      // Each event's data line is the `data` schema as JSON.
      ok = {{"description", "A stream of Server-Sent Events; each data line is one event as JSON"},
            {"content", {{"text/event-stream", {{"schema", {{"type", "string"}}}}}}}};
      schemas.Ref(r.data, r.names);  // listed among the schemas for clients to use
    }
    op["responses"] = {
        {"200", ok},
        {"400", ErrorResponse("INVALID_ARGUMENT (or FAILED_PRECONDITION): the request is refused and changes nothing")},
        {"401", ErrorResponse("UNAUTHENTICATED: no valid bearer token")},
        {"403", ErrorResponse("PERMISSION_DENIED: the caller's role does not allow it")},
        {"default", ErrorResponse("Error: the envelope's code and errorMsg say what went wrong")}};
    if (params.size() > r.query.size()) {
      op["responses"]["404"] = ErrorResponse("NOT_FOUND: nothing by that name (or another project's)");
    }
    paths[r.path][absl::AsciiStrToLower(r.method)] = op;
  }
  json components = schemas.schemas();
  components["Error"] = {{"type", "object"},
                         {"properties",
                          {{"status", {{"type", "integer"}}},
                           {"code", {{"type", "string"}}},
                           {"errorMsg", {{"type", "string"}}},
                           {"data", {{"type", "object"}, {"nullable", true}}}}}};
  json doc = {{"openapi", "3.0.3"},
              {"info",
               {{"title", "Jointcloud API"},
                {"version", version},
                {"description",
                 "Jointcloud control plane (T/AI 123.6). Every response is the envelope "
                 "{status, code, errorMsg, data}."}}},
              {"servers", {{{"url", "/"}, {"description", "the gateway that serves this document"}}}},
              // Every operation needs a bearer token (an API token or an OIDC JWT).
              {"security", {{{"bearerAuth", json::array()}}}},
              {"paths", paths},
              {"components",
               {{"schemas", components},
                {"securitySchemes",
                 {{"bearerAuth",
                   {{"type", "http"},
                    {"scheme", "bearer"},
                    {"description", "An API token (jc_...) or an OIDC token (JWT)"}}}}}}}};
  return doc.dump(2);
}

}  // namespace jc::gateway
