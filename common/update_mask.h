#pragma once

// Partial updates with a google.protobuf.FieldMask, shared by every service.

#include <string>
#include <vector>

#include <google/protobuf/field_mask.pb.h>
#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace jc {

// Copies the fields named by `mask` from `patch` into `target`. An empty mask means every
// field in `mutable_fields`. The `key_fields` may appear in the mask (they are the
// resource's identity and are left alone); any other field outside `mutable_fields` is
// InvalidArgument, naming the updatable ones.
absl::Status ApplyUpdate(const google::protobuf::Message& patch,
                         const google::protobuf::FieldMask& mask,
                         const std::vector<std::string>& mutable_fields,
                         const std::vector<std::string>& key_fields,
                         google::protobuf::Message* target);

}  // namespace jc
