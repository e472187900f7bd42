#include "common/update_mask.h"

#include <google/protobuf/util/field_mask_util.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jc {

absl::Status ApplyUpdate(const google::protobuf::Message& patch,
                         const google::protobuf::FieldMask& mask,
                         const std::vector<std::string>& mutable_fields,
                         const std::vector<std::string>& key_fields,
                         google::protobuf::Message* target) {
  using google::protobuf::util::FieldMaskUtil;
  google::protobuf::FieldMask effective;
  for (const auto& path : mask.paths()) {
    std::string top = path.substr(0, path.find('.'));
    if (std::find(key_fields.begin(), key_fields.end(), top) != key_fields.end()) continue;
    if (std::find(mutable_fields.begin(), mutable_fields.end(), top) == mutable_fields.end()) {
      return absl::InvalidArgumentError(absl::StrCat("field \"", path,
                                                     "\" cannot be updated; updatable fields: ",
                                                     absl::StrJoin(mutable_fields, ", ")));
    }
    effective.add_paths(path);
  }
  if (mask.paths().empty()) {
    for (const auto& f : mutable_fields) effective.add_paths(f);
  }
  FieldMaskUtil::MergeOptions merge;
  merge.set_replace_message_fields(true);
  merge.set_replace_repeated_fields(true);
  FieldMaskUtil::MergeMessageTo(patch, effective, merge, target);
  return absl::OkStatus();
}

}  // namespace jc
