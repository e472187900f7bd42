#pragma once

// Where a walk over a message by reflection is, named only when it has something to say.
//
// The walks that check every request (UTF-8 strings at admission, times in range after a
// REST body is read) used to build each field's path as a string on the way down: a few
// allocations for every field of every request, for a name read only when the request is
// refused. A stack of (field, index) is kept instead and rendered on demand.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"

namespace jc {

class ProtoPath {
 public:
  enum class Names { kProto, kJson };

  // `index`: the element of a repeated field; -1 for a singular one.
  void Push(const google::protobuf::FieldDescriptor* field, int index = -1) { steps_.emplace_back(field, index); }
  void Pop() { steps_.pop_back(); }
  // Sets the top's element (a repeated field's next item) without a pop and push.
  void SetIndex(int index) { steps_.back().second = index; }

  // "tasks[0].deadline" (kJson, with indices) or "tasks.deadline" (kProto, without).
  std::string Render(Names names, bool indices) const {
    std::string out;
    for (const auto& [field, index] : steps_) {
      if (!out.empty()) out.push_back('.');
      out += names == Names::kJson ? field->json_name() : field->name();
      if (indices && index >= 0) absl::StrAppend(&out, "[", index, "]");
    }
    return out;
  }

 private:
  std::vector<std::pair<const google::protobuf::FieldDescriptor*, int>> steps_;
};

}  // namespace jc
