#pragma once

// Resources are stored as protobuf JSON documents (see docs/adr/0002-store-documents.md).

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/json_proto.h"

namespace jc::store {

inline absl::StatusOr<std::string> EncodeDoc(const google::protobuf::Message& message) {
  return ProtoToJson(message, JsonNames::kSnakeCase, /*print_defaults=*/false);
}

// `doc` (a JSON object) with the field `name` set to `value` (JSON). A document whose big
// part never changes (a job's request) is encoded once for it and spliced in at each
// write; field order does not matter to the decoder.
inline std::string SpliceDocField(absl::string_view name, absl::string_view value, absl::string_view doc) {
  bool empty = doc.size() <= 2;  // "{}"
  return absl::StrCat("{\"", name, "\":", value, empty ? "}" : ",", empty ? "" : doc.substr(1));
}

template <typename Message>
absl::StatusOr<Message> DecodeDoc(const std::optional<std::string>& column) {
  Message message;
  if (!column.has_value()) return absl::DataLossError("stored document is NULL");
  absl::Status parsed = JsonToProto(*column, &message);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat("stored document does not parse: ", parsed.message()));
  }
  return message;
}

}  // namespace jc::store
