#include "common/audit/describe_object.h"

#include <google/protobuf/descriptor.h>

#include "absl/strings/str_cat.h"

namespace jc::audit {
namespace {

using google::protobuf::FieldDescriptor;

// Identifying fields, most specific first.
constexpr const char* kIdFields[] = {"job_id",    "ai_center_id", "resource_spec_id", "image_id",
                                     "token_id",  "data_name",    "user_name",        "project", "name"};

// The value of string field `name` of `m`, or empty.
std::string Field(const google::protobuf::Message& m, const char* name) {
  const FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(name);
  if (f == nullptr || f->is_repeated() || f->cpp_type() != FieldDescriptor::CPPTYPE_STRING) return "";
  return m.GetReflection()->GetString(m, f).substr(0, 128);
}

void Collect(const google::protobuf::Message& m, int depth, std::string* out) {
  for (const char* name : kIdFields) {
    std::string value = Field(m, name);
    if (value.empty()) continue;
    absl::StrAppend(out, name, "=", value);
    // Keys of two parts: a dataset's version, a membership's project.
    const char* second = std::string(name) == "data_name" ? "data_version"
                         : std::string(name) == "user_name" ? "project"
                                                            : nullptr;
    if (second != nullptr && !Field(m, second).empty()) absl::StrAppend(out, " ", second, "=", Field(m, second));
    return;
  }
  if (depth >= 2) return;
  // The resource the request carries (CreateCenterRequest.center, the dataset key).
  const auto* desc = m.GetDescriptor();
  const auto* refl = m.GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    if (f->is_repeated() || f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || !refl->HasField(m, f)) continue;
    Collect(refl->GetMessage(m, f), depth + 1, out);
    if (!out->empty()) return;
  }
}

}  // namespace

std::string DescribeObject(const google::protobuf::Message& request) {
  std::string out;
  Collect(request, 0, &out);
  return out;
}

}  // namespace jc::audit
