#pragma once

// JSON <-> protobuf through protobuf's own JSON mapping, with clear errors.

#include "absl/strings/string_view.h"
#include <string>
#include <string_view>

#include <google/protobuf/message.h>
#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jc {

// Field naming on output. The standard's Tables 1-6 use snake_case (ai_center_id);
// Appendix A uses lowerCamelCase (imageId, resourceSpecId). Input accepts both.
enum class JsonNames { kSnakeCase, kCamelCase };

// `print_defaults` prints fields at their default value too (what API clients expect to
// see); stored documents leave them out, which is several times faster to encode.
absl::StatusOr<std::string> ProtoToJson(const google::protobuf::Message& message,
                                        JsonNames names, bool print_defaults = true);
// Parses `json` into `message`; unknown fields are an error so typos do not pass silently.
absl::Status JsonToProto(absl::string_view json, google::protobuf::Message* message);
// The same as JsonToProto(doc.dump(), message), for a body already parsed: read by
// reflection where it can be (jc::FillFromJson, ADR 0016), else by protobuf's parser.
absl::Status JsonDocToProto(const nlohmann::json& doc, google::protobuf::Message* message);

}  // namespace jc
