#pragma once

// Per message type, the fields a reflection walk looking for one kind of field must visit:
// the fields of that kind, and the message fields whose type can lead to one. Worked out
// once per type and kept for the process.
//
// The walks that check every request (times in range, strings that are UTF-8) listed every
// set field of every message by reflection; most of a request's fields can hold neither,
// and listing them was most of the walk's cost.

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/descriptor.h"

namespace jc {

class ProtoFieldPlans {
 public:
  // `sought`: whether a field is of the kind the walk looks for. `through_maps`: whether
  // a map field (its entries are messages) is walked into when its entry can hold one.
  ProtoFieldPlans(bool (*sought)(const google::protobuf::FieldDescriptor*), bool through_maps)
      : sought_(sought), through_maps_(through_maps) {}

  // `d`'s fields to visit, in field-number order (the order reflection lists set fields).
  // The reference stays valid for this object's life.
  const std::vector<const google::protobuf::FieldDescriptor*>& Of(const google::protobuf::Descriptor* d)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Open = absl::flat_hash_set<const google::protobuf::Descriptor*>;
  // Whether `d` can hold a sought field, its plan recorded. A type met again while its own
  // plan is being worked out (a recursive message) counts as able to: the walk looks and
  // finds out.
  bool CanHold(const google::protobuf::Descriptor* d, Open& open) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::vector<const google::protobuf::FieldDescriptor*>& Work(const google::protobuf::Descriptor* d,
                                                                    Open& open) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  bool (*const sought_)(const google::protobuf::FieldDescriptor*);
  const bool through_maps_;
  absl::Mutex mu_;
  // A node map: references handed out stay valid as plans are added.
  absl::node_hash_map<const google::protobuf::Descriptor*, std::vector<const google::protobuf::FieldDescriptor*>> plans_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace jc
