#include "common/audit/describe_object.h"

#include <google/protobuf/descriptor.h>

#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace jc::audit {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Identifying fields, most specific first.
constexpr const char* kIdFields[] = {"job_id",    "ai_center_id", "resource_spec_id", "image_id",
                                     "token_id",  "data_name",    "user_name",        "project", "name"};

// Per message type, its identifying fields in kIdFields' order (each with the second part
// of its key, if any) and the singular message fields a request's resource may be in,
// found by name once per type: every audited call used to look each name up.
struct Plan {
  struct Id {
    const FieldDescriptor* field;
    const FieldDescriptor* second;  // a dataset's version, a membership's project; or null
  };
  std::vector<Id> ids;
  std::vector<const FieldDescriptor*> messages;
};

// The singular string field `name` of `d`, or null.
const FieldDescriptor* StringField(const Descriptor* d, const char* name) {
  const FieldDescriptor* f = d->FindFieldByName(name);
  if (f == nullptr || f->is_repeated() || f->cpp_type() != FieldDescriptor::CPPTYPE_STRING) return nullptr;
  return f;
}

const Plan& PlanOf(const Descriptor* d) {
  static absl::Mutex mu;
  static auto* const plans = new absl::node_hash_map<const Descriptor*, Plan>;  // under mu
  {
    absl::ReaderMutexLock lock(&mu);
    if (auto it = plans->find(d); it != plans->end()) return it->second;
  }
  Plan plan;
  for (const char* name : kIdFields) {
    const FieldDescriptor* f = StringField(d, name);
    if (f == nullptr) continue;
    const absl::string_view n = name;
    const char* second = n == "data_name" ? "data_version" : n == "user_name" ? "project" : nullptr;
    plan.ids.push_back({f, second == nullptr ? nullptr : StringField(d, second)});
  }
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (!f->is_repeated() && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) plan.messages.push_back(f);
  }
  absl::MutexLock lock(&mu);
  return plans->try_emplace(d, std::move(plan)).first->second;  // node map: stays put
}

// The value of string field `f` of `m`, at most 128 bytes of it.
absl::string_view Value(const google::protobuf::Message& m, const FieldDescriptor* f, std::string* scratch) {
  return absl::string_view(m.GetReflection()->GetStringReference(m, f, scratch)).substr(0, 128);
}

void Collect(const google::protobuf::Message& m, int depth, std::string* out) {
  const Plan& plan = PlanOf(m.GetDescriptor());
  std::string scratch;
  for (const Plan::Id& id : plan.ids) {
    const absl::string_view value = Value(m, id.field, &scratch);
    if (value.empty()) continue;
    absl::StrAppend(out, id.field->name(), "=", value);
    // Keys of two parts: a dataset's version, a membership's project.
    if (id.second != nullptr) {
      std::string second_scratch;
      const absl::string_view second = Value(m, id.second, &second_scratch);
      if (!second.empty()) absl::StrAppend(out, " ", id.second->name(), "=", second);
    }
    return;
  }
  if (depth >= 2) return;
  // The resource the request carries (CreateCenterRequest.center, the dataset key).
  const auto* refl = m.GetReflection();
  for (const FieldDescriptor* f : plan.messages) {
    if (!refl->HasField(m, f)) continue;
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
