#pragma once

// A request body's first field its message does not have, said the way a person fixes it:
// where it is (`tasks[1].comand`) and the nearest name the message does have ("did you
// mean command?"). Protobuf's JSON parser says only "Cannot find field." of the first one.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "google/protobuf/descriptor.h"

namespace jc::gateway {

struct UnknownField {
  std::string path;        // "tasks[1].comand"
  std::string suggestion;  // "command", or "" when no name is near
  std::string known;       // the names the object may hold, for when none is near
  std::string Message() const;
};

// The field a JSON key names, as protobuf's JSON mapping takes it: the proto name or the
// lowerCamel JSON name; null when `desc` has none.
const google::protobuf::FieldDescriptor* FieldOfJsonKey(const google::protobuf::Descriptor* desc,
                                                        const std::string& key);

// Walks `doc` against `desc` (field names as protobuf's JSON mapping takes them: the
// lowerCamel JSON name or the proto name); nullopt when every field is known.
std::optional<UnknownField> FindUnknownField(const nlohmann::json& doc, const google::protobuf::Descriptor* desc);

}  // namespace jc::gateway
