#include "common/proto_field_plan.h"

#include <algorithm>

namespace jc {

const std::vector<const google::protobuf::FieldDescriptor*>& ProtoFieldPlans::Of(const google::protobuf::Descriptor* d) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (auto it = plans_.find(d); it != plans_.end()) return it->second;
  }
  absl::MutexLock lock(&mu_);
  Open open;
  return Work(d, open);
}

bool ProtoFieldPlans::CanHold(const google::protobuf::Descriptor* d, Open& open) {
  if (open.contains(d)) return true;
  return !Work(d, open).empty();
}

const std::vector<const google::protobuf::FieldDescriptor*>& ProtoFieldPlans::Work(
    const google::protobuf::Descriptor* d, Open& open) {
  if (auto it = plans_.find(d); it != plans_.end()) return it->second;
  open.insert(d);
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (sought_(f)) {
      fields.push_back(f);
      continue;
    }
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_map() && !through_maps_) continue;
    if (CanHold(f->message_type(), open)) fields.push_back(f);
  }
  open.erase(d);
  std::sort(fields.begin(), fields.end(), [](const auto* a, const auto* b) { return a->number() < b->number(); });
  return plans_.emplace(d, std::move(fields)).first->second;
}

}  // namespace jc
